// Versioned migrations. Each runs in one transaction with its version row, under a lock, so several
// processes starting together apply each migration exactly once and the losers just see it done.
import type { Db, Queryable } from '../db.js';
import * as m001 from './001-initial.js';
import * as m002 from './002-queue-samples.js';
import * as m003 from './003-circuit-breaker.js';
import * as m004 from './004-delivery-engine.js';
import * as m005 from './005-ordering-and-rate-limits.js';
import * as m006 from './006-replay-jobs.js';
import * as m007 from './007-line-index-by-completion.js';
import * as m008 from './008-dead-letter-count.js';
import * as m009 from './009-dead-letters-awaiting.js';
import * as m010 from './010-endpoint-headers.js';
import * as m011 from './011-signature-schemes.js';
import * as m012 from './012-test-messages.js';
import * as m013 from './013-trace-context.js';
import * as m014 from './014-hashed-keys.js';
import * as m015 from './015-answer-times.js';
import * as m016 from './016-fanout-queue.js';
import type { ConvertContext, KeyConverter } from './014-hashed-keys.js';

export type { KeyConverter } from './014-hashed-keys.js';

interface Migration {
  version: number;
  name: string;
  statements: (dialect: Db['dialect']) => string[];
  /**
   * Rewrites rows where SQL alone cannot (014: keyed hashes need the encryption key), after
   * `statements`; answers how many rows it rewrote.
   */
  convert?: (tx: Queryable, ctx: ConvertContext) => Promise<number>;
}

export const MIGRATIONS: readonly Migration[] = [
  { version: 1, ...m001 },
  { version: 2, ...m002 },
  { version: 3, ...m003 },
  { version: 4, ...m004 },
  { version: 5, ...m005 },
  { version: 6, ...m006 },
  { version: 7, ...m007 },
  { version: 8, ...m008 },
  { version: 9, ...m009 },
  { version: 10, ...m010 },
  { version: 11, ...m011 },
  { version: 12, ...m012 },
  { version: 13, ...m013 },
  { version: 14, ...m014 },
  { version: 15, ...m015 },
  { version: 16, ...m016 },
];

export const LATEST_VERSION = Math.max(...MIGRATIONS.map((m) => m.version));

// Arbitrary constant: the key of the PostgreSQL advisory lock that serialises migrating processes.
const MIGRATION_LOCK_KEY = 7_245_113_001;

async function appliedVersions(tx: Queryable): Promise<Set<number>> {
  const rows = await tx.all<{ version: number }>('SELECT version FROM schema_migrations');
  return new Set(rows.map((r) => Number(r.version)));
}

/**
 * HOOKLINE_DATABASE_URL's `?schema=` (or a search_path) may name a schema that does not exist yet:
 * PostgreSQL then has no schema to create tables in (current_schema() is null), so migrate creates
 * the first one the search_path names (docs/producers.md, "Schema").
 */
async function createMissingSchema(tx: Queryable): Promise<void> {
  const row = await tx.one<{ schema: string | null; path: string }>(
    "SELECT current_schema() AS schema, current_setting('search_path') AS path",
  );
  if (!row || row.schema !== null) return;
  const first = row.path
    .split(',')[0]!
    .trim()
    .replace(/^"(.*)"$/, '$1')
    .replaceAll('""', '"');
  if (first === '' || first === '$user') return;
  await tx.run(`CREATE SCHEMA IF NOT EXISTS "${first.replaceAll('"', '""')}"`);
}

export interface MigrateResult {
  applied: number[];
  current: number;
}

/**
 * `keys` hashes and seals with the processes' encryption key (engine/sealing.ts, keyConverter):
 * migration 14 converts the keys of rows written before it with it. Without it, a migration that has
 * rows to convert fails (and is rolled back) instead of writing hashes no process could match.
 */
export async function migrate(
  db: Db,
  onProgress: (message: string) => void = () => {},
  keys: KeyConverter | null = null,
): Promise<MigrateResult> {
  const applied: number[] = [];
  let rewritten = 0;
  await db.transaction(async (tx) => {
    applied.length = 0; // the store may run this again after a lost deadlock
    rewritten = 0;
    if (db.dialect === 'postgres') {
      // Processes starting together wait here while one migrates, and an index build on a big table
      // takes long: the session limits for ordinary work (store/postgres/pg-db.ts) do not apply.
      await tx.run('SET LOCAL lock_timeout = 0');
      await tx.run('SET LOCAL statement_timeout = 0');
      await tx.one('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      await createMissingSchema(tx);
    }
    await tx.run(
      `CREATE TABLE IF NOT EXISTS schema_migrations (
        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
    );
    const done = await appliedVersions(tx);
    for (const migration of MIGRATIONS) {
      if (done.has(migration.version)) continue;
      onProgress(`applying migration ${migration.version}: ${migration.name}`);
      for (const sql of migration.statements(db.dialect)) await tx.run(sql);
      rewritten += (await migration.convert?.(tx, { keys, onProgress })) ?? 0;
      await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
        migration.version,
        migration.name,
        Date.now(),
      ]);
      applied.push(migration.version);
    }
    const newest = Math.max(0, ...done, ...applied);
    if (newest > LATEST_VERSION) {
      throw new Error(
        `the database schema is at version ${newest}, newer than this hookline (${LATEST_VERSION}); upgrade hookline`,
      );
    }
  });
  if (rewritten > 0 && db.compact) {
    // The rewritten rows' old bytes are still in the files (free space of pages, the log).
    onProgress('rebuilding the database file (VACUUM), so rewritten rows leave no old copies in it');
    await db.compact();
  }
  return { applied, current: LATEST_VERSION };
}
