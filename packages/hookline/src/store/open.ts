import { splitSchema } from '../database-url.js';
import type { Db } from './db.js';
import { SqliteDb, type SqliteOptions } from './sqlite/sqlite-db.js';

/**
 * Opens the database HOOKLINE_DATABASE_URL names: `sqlite:<path>` or `postgres://…[?schema=name]`. The PostgreSQL
 * driver is loaded only when it is used, so the embedded default starts without it.
 */
export async function openDb(databaseUrl: string, sqlite: SqliteOptions = {}): Promise<Db> {
  if (databaseUrl.startsWith('sqlite:')) return new SqliteDb(databaseUrl.slice('sqlite:'.length), sqlite);
  const { PgDb } = await import('./postgres/pg-db.js');
  // `?schema=` puts hookline's tables in a schema of their own (docs/producers.md, "Schema").
  const { connectionString, schema } = splitSchema(databaseUrl);
  return new PgDb({ connectionString, ...(schema === null ? {} : { schema }) });
}
