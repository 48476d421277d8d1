// The narrow database boundary both adapters implement. SQL is written once, PostgreSQL-style
// (`$1`, `$2`, …); the SQLite adapter rewrites placeholders. Values crossing it are strings, numbers
// (timestamps are epoch milliseconds in BIGINT columns), Buffers (BLOB/BYTEA) and null.

export type Dialect = 'sqlite' | 'postgres';
export type SqlValue = string | number | Buffer | null;

/**
 * What a caller outside the store needs to know of the database it runs on, each named for the
 * decision it drives, so that no caller tests the dialect (docs/architecture.md, "Two stores"). Each
 * adapter sets them, with its reasons (store/sqlite/sqlite-db.ts, store/postgres/pg-db.ts).
 */
export interface Capabilities {
  /** Deliveries one fan-out transaction writes at most, and endpoints it reads per page. */
  readonly fanOutChunk: number;
  /**
   * A write transaction that finds nothing to do costs every other writer: look with a read first, and
   * take the writer only when it found work.
   */
  readonly readBeforeWrite: boolean;
  /**
   * An emit fans out its message in its own transaction when the tenant has few endpoints
   * (engine/fanout.ts, insertAndFanOut). Where false, a message is left to the workers, and a group
   * of emits can be written as one insert without a transaction around it.
   */
  readonly fanOutOnEmit: boolean;
  /**
   * Which flushes of successful outcomes claim the work their freed slots make room for, in their own
   * transaction (store/deliveries.ts, recordSuccessesThenClaim): every one, or only those that let
   * the next delivery of an ordering key's line go (a transaction already, holding its queue row).
   * The others leave the room to the worker's claims.
   */
  readonly claimWithOutcomes: 'every' | 'keyed';
  /**
   * A worker with attempts under way claims at most once in this many milliseconds (0: whenever it
   * has room). Under a stream of emits, claims woken by every fan-out took a few deliveries each, and
   * where each claim is a round trip and a write of its endpoints' queue rows, the queue's cost per
   * delivery grew with the rate of wake-ups instead of falling with the batch.
   */
  readonly claimSpacingMs: number;
}

/** Housekeeping a long-running process runs beside its connection; stopped before the connection closes. */
export interface Maintenance {
  stop(): Promise<void>;
}

export interface Queryable {
  readonly dialect: Dialect;
  readonly capabilities: Capabilities;
  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]>;
  one<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined>;
  /** Runs a statement and answers how many rows it changed. */
  run(sql: string, params?: readonly SqlValue[]): Promise<number>;
}

/** Wake-ups between processes sharing one database (PostgreSQL's NOTIFY/LISTEN). */
export interface Notifications {
  notify(channel: string, payload: string): Promise<void>;
  /** Calls `onNotify` with the payload of each notification on `channel` until the returned close is called. */
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    log: { warn(obj: object, msg: string): void },
  ): Promise<() => Promise<void>>;
}

export interface Db extends Queryable {
  /** Present where other processes may share the database. */
  readonly notifications?: Notifications;
  /** All statements of `fn` commit together or not at all. Keep network I/O out of `fn`. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
  /**
   * Rebuilds the storage so that rows rewritten to take something out of them leave no old copies
   * behind (SQLite: VACUUM, then a truncating checkpoint of the log). Absent where that would take an
   * exclusive lock on a shared database (PostgreSQL's VACUUM FULL is the operator's decision).
   */
  compact?(): Promise<void>;
  /**
   * Starts what a long-running process needs beside its connection, resolving once it runs; null where
   * nothing is needed. Called at most once, before the process's work begins.
   */
  startMaintenance(): Promise<Maintenance> | null;
  /**
   * What another thread of this process passes to openDb (as ContextOptions.threadShare) to write
   * the same database beside this connection; null where connections need nothing of each other.
   */
  threadShare(): SharedArrayBuffer | null;
  /**
   * A thread that was given threadShare() has exited: whatever it held of the shared state is let go
   * (on SQLite, the write lock, which nothing else frees from a thread that died holding it).
   */
  threadExited(threadId: number): void;
  /**
   * The same database for the workers' own transitions (fan-out, claims, outcomes, the reaper, replay
   * batches), whose commits need not wait for the disk: a server crash can undo only the last of them,
   * and the engine redoes what it undoes (docs/architecture.md, "Commits the workers do not wait
   * for"). Everything an answer to a caller promises (an emit's 202, an endpoint saved) goes through
   * this Db itself.
   */
  forWorkers(): Db;
}

/** Dialect-specific fragments, so shared SQL stays shared. */
export function blobType(dialect: Dialect): string {
  return dialect === 'postgres' ? 'BYTEA' : 'BLOB';
}

/** A BLOB/BYTEA from hex text: how binary values travel inside a JSON parameter (jsonRecords). NULL stays NULL. */
export function blobFromHex(dialect: Dialect, expr: string): string {
  return dialect === 'postgres' ? `decode(${expr}, 'hex')` : `unhex(${expr})`;
}

/**
 * Statement texts that come in a few shapes however many rows they carry (messages.ts pads its
 * inserts to a power of two of rows): PostgreSQL prepares them whatever their number of parameters,
 * which otherwise leaves long lists unprepared (postgres/pg-db.ts, statementName).
 */
const fewShapes = new Set<string>();

/** Marks `sql` as one of a bounded set of shapes (fewShapes) and answers it. */
export function oneOfFewShapes(sql: string): string {
  fewShapes.add(sql);
  return sql;
}

export function isOneOfFewShapes(sql: string): boolean {
  return fewShapes.has(sql);
}

/** `$first, $first+1, …` for `count` values: the list inside `IN (…)` or one row of `VALUES (…)`. */
export function placeholders(count: number, first = 1): string {
  return Array.from({ length: count }, (_, i) => `$${first + i}`).join(', ');
}

/**
 * `LIMIT` to the value of parameter `$n`. SQLite (3.46 on) plans a bound LIMIT for the value it is
 * bound to, so each new binding makes the statement prepare itself again: ~35 µs a run, more than the
 * read itself. Cast, the value is read when the statement runs and the prepared plan is kept
 * (docs/architecture.md, "Prepared plans").
 */
export function limitParam(n: number): string {
  return `LIMIT CAST($${n} AS INTEGER)`;
}

/** A subquery yielding the strings of the JSON array passed as parameter `$n`. */
export function jsonTextArray(dialect: Dialect, n: number): string {
  return dialect === 'postgres'
    ? `SELECT jsonb_array_elements_text($${n}::jsonb)`
    : `SELECT value FROM json_each($${n})`;
}

export type RecordColumnType = 'text' | 'int' | 'bigint';

/**
 * A FROM item `AS alias` yielding one row per element of the JSON array of objects passed as
 * parameter `$n`, with the named columns: the shape set-based transitions take their rows in, one
 * parameter whatever the batch size (docs/architecture.md, "Set-based transitions"). Column names
 * should not clash with the updated table's, so `RETURNING` stays unambiguous in both dialects.
 */
export function jsonRecords(
  dialect: Dialect,
  n: number,
  columns: Readonly<Record<string, RecordColumnType>>,
  alias = 't',
): string {
  const names = Object.keys(columns);
  if (dialect === 'postgres') {
    const defs = names.map((c) => `${c} ${columns[c]}`).join(', ');
    return `jsonb_to_recordset($${n}::jsonb) AS ${alias}(${defs})`;
  }
  const picks = names.map((c) => `value ->> '${c}' AS ${c}`).join(', ');
  return `(SELECT ${picks} FROM json_each($${n})) AS ${alias}`;
}

/** The smaller / larger of non-null expressions. */
export function least(dialect: Dialect, ...exprs: string[]): string {
  return `${dialect === 'postgres' ? 'LEAST' : 'MIN'}(${exprs.join(', ')})`;
}

export function greatest(dialect: Dialect, ...exprs: string[]): string {
  return `${dialect === 'postgres' ? 'GREATEST' : 'MAX'}(${exprs.join(', ')})`;
}

/** Row locks for the rest of the transaction; SQLite's one writer needs none. */
export function forUpdate(dialect: Dialect, skipLocked = false, of?: string): string {
  if (dialect !== 'postgres') return '';
  return `FOR UPDATE${of ? ` OF ${of}` : ''}${skipLocked ? ' SKIP LOCKED' : ''}`;
}

/**
 * The connection itself is gone: the server ended the session (idle in transaction too long, restart,
 * pg_terminate_backend) or the socket failed. Before COMMIT was sent such a transaction certainly
 * rolled back, so it may be run again on a fresh connection.
 */
export function isConnectionLoss(err: unknown): boolean {
  const code = (err as { code?: string }).code ?? '';
  // 57P01–57P03: admin_shutdown, crash_shutdown, cannot_connect_now; 25P03: idle-in-transaction
  // timeout; 08xxx: connection exceptions; the rest are the driver's and the socket's own.
  if (/^(57P0[123]|25P03|08...)$/.test(code)) return true;
  if (['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT'].includes(code)) return true;
  const message = (err as { message?: string }).message ?? '';
  return /Connection terminated|not queryable|connection timeout/i.test(message);
}

/**
 * The transaction lost a race (deadlock_detected, serialization_failure): run again, it may well
 * succeed.
 */
export function isLostRace(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === '40P01' || code === '40001';
}

/**
 * The database cannot serve the request for now, through no fault of the request: a lock held longer
 * than lock_timeout or busy_timeout, a statement past statement_timeout, a transaction that kept losing
 * races, the server restarting, out of connections, or the connection lost (both drivers' codes). The
 * API answers 503 with Retry-After (docs/errors.md, `database_unavailable`), not 500.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    // 55P03 lock_not_available, 57014 query_canceled (statement_timeout), 53300 too_many_connections.
    if (/^(55P03|57014|53300)$/.test(code)) return true;
    if (code.startsWith('SQLITE_BUSY')) return true;
  }
  // A lost race reaches the API only after the transaction's own retries.
  return (
    isLostRace(err) ||
    isConnectionLoss(err) ||
    /timeout exceeded when trying to connect/i.test(String((err as Error)?.message))
  );
}

/** A unique constraint refused the write (both drivers' codes). */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/**
 * A condition PostgreSQL checks on rows found otherwise, never by a partial index whose predicate it
 * states. The fences of the queue's transitions find their rows by primary key and then check the
 * status; `status = 'pending'` alone would also match `deliveries_pending_by_endpoint`, and a plan
 * prepared while that set was small (a quiet queue: the usual state), kept for the connection's life,
 * scanned the whole set and compared each row with every id of the batch. Under a backlog that made
 * each claim O(backlog × batch) (docs/architecture.md, "Prepared plans").
 */
export function notIndexed(condition: string): string {
  return `(${condition}) IS TRUE`;
}
