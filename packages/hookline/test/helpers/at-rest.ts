// What a copy of the database reveals (docs/security.md, "Encryption at rest"): on SQLite the bytes of
// the database files, WAL included, after the service has closed (its last connection checkpoints the
// log into the main file); on PostgreSQL the text of every row of the tables that hold tenant data.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { TestService } from './service.js';
import { PG_URL } from './stores.js';

const TABLES = ['messages', 'deliveries', 'dead_letters', 'endpoints', 'audit_log'];

export interface AtRest {
  /** How many SQLite files, or PostgreSQL rows, hold `needle` (as text, or as hex on PostgreSQL). */
  hits(needle: string): Promise<number>;
  close(): Promise<void>;
}

/** Closes `t`'s service and looks at what it left behind. */
export async function atRest(t: TestService): Promise<AtRest> {
  await t.service.close();
  if (t.database.kind === 'sqlite') {
    const files = readdirSync(t.database.dir)
      .filter((f) => f.startsWith('hookline.db'))
      .map((f) => readFileSync(path.join(t.database.dir, f)));
    return {
      hits: async (needle) => files.filter((b) => b.includes(Buffer.from(needle))).length,
      close: async () => {},
    };
  }
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  const count = async (needle: string) => {
    let n = 0;
    for (const table of TABLES) {
      const { rows } = await client.query<{ n: string }>(
        `SELECT COUNT(*) AS n FROM ${t.database.schema}.${table} x WHERE x::text LIKE '%' || $1 || '%'`,
        [needle],
      );
      n += Number(rows[0]!.n);
    }
    return n;
  };
  return {
    hits: async (needle) => (await count(needle)) + (await count(Buffer.from(needle).toString('hex'))),
    close: () => client.end(),
  };
}
