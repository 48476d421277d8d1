import { splitSchema } from '../database-url.js';
import type { Db } from './db.js';
import { SqliteDb, type SqliteOptions } from './sqlite/sqlite-db.js';

export interface OpenOptions {
  /** SQLite's durability of a commit (HOOKLINE_SQLITE_SYNCHRONOUS). */
  synchronous?: SqliteOptions['synchronous'];
  /** What another thread's connection shares with this one (Db.threadShare). */
  threadShare?: SharedArrayBuffer | undefined;
}

/**
 * Opens the database HOOKLINE_DATABASE_URL names: `sqlite:<path>` or `postgres://…[?schema=name]`. The PostgreSQL
 * driver is loaded only when it is used, so the embedded default starts without it.
 */
export async function openDb(databaseUrl: string, options: OpenOptions = {}): Promise<Db> {
  if (databaseUrl.startsWith('sqlite:')) {
    const { synchronous, threadShare } = options;
    // Another thread's connection runs the maintenance (checkpoints) for both.
    const sqlite: SqliteOptions = threadShare
      ? { synchronous, threadLock: threadShare, checkpoints: 'elsewhere' }
      : { synchronous };
    return new SqliteDb(databaseUrl.slice('sqlite:'.length), sqlite);
  }
  const { PgDb } = await import('./postgres/pg-db.js');
  // `?schema=` puts hookline's tables in a schema of their own (docs/producers.md, "Schema").
  const { connectionString, schema } = splitSchema(databaseUrl);
  return new PgDb({ connectionString, ...(schema === null ? {} : { schema }) });
}
