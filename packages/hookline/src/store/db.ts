// The narrow database boundary both adapters implement. SQL is written once, PostgreSQL-style
// (`$1`, `$2`, …); the SQLite adapter rewrites placeholders. Values crossing it are strings, numbers
// (timestamps are epoch milliseconds in BIGINT columns), Buffers (BLOB/BYTEA) and null.

export type Dialect = 'sqlite' | 'postgres';
export type SqlValue = string | number | Buffer | null;

export interface Queryable {
  readonly dialect: Dialect;
  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  one<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined>;
  /** Runs a statement and answers how many rows it changed. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
}

export interface Db extends Queryable {
  /** All statements of `fn` commit together or not at all. Keep network I/O out of `fn`. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Dialect-specific fragments, so shared SQL stays shared. */
export function blobType(dialect: Dialect): string {
  return dialect === 'postgres' ? 'BYTEA' : 'BLOB';
}

/** `$first, $first+1, …` for `count` values: the list inside `IN (…)` or one row of `VALUES (…)`. */
export function placeholders(count: number, first = 1): string {
  return Array.from({ length: count }, (_, i) => `$${first + i}`).join(', ');
}

/** A subquery yielding the strings of the JSON array passed as parameter `$n`. */
export function jsonTextArray(dialect: Dialect, n: number): string {
  return dialect === 'postgres'
    ? `SELECT jsonb_array_elements_text($${n}::jsonb)`
    : `SELECT value FROM json_each($${n})`;
}
