import type { Db } from './db.js';
import { PgDb } from './postgres/pg-db.js';
import { SqliteDb } from './sqlite/sqlite-db.js';

/** Opens the database HOOKLINE_DATABASE_URL names: `sqlite:<path>` or `postgres://…`. */
export function openDb(databaseUrl: string): Db {
  if (databaseUrl.startsWith('sqlite:')) return new SqliteDb(databaseUrl.slice('sqlite:'.length));
  return new PgDb({ connectionString: databaseUrl });
}
