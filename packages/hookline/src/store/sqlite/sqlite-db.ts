// better-sqlite3 is synchronous and has one connection, so an async transaction must hold every other
// statement back until it ends: a small mutex queues them. Statements outside a transaction run at once.
import Database from 'better-sqlite3';
import type { Capabilities, Db, Maintenance, Queryable, SqlValue } from '../db.js';
import { SqliteCheckpointer } from './checkpointer.js';
import { preparePrivateDatabaseFile } from './private-files.js';
import { ThreadLock } from './thread-lock.js';

interface Prepared {
  stmt: Database.Statement;
  /** For each `?` in the rewritten SQL, which `$n` parameter it takes. */
  order: number[];
}

export interface SqliteOptions {
  /**
   * `normal` (the default): in WAL mode a commit is durable once the WAL is synced at the next
   * checkpoint; after a power loss or OS crash (not a process crash) the last commits may be lost.
   * `full`: every commit waits for the disk (docs/configuration.md, HOOKLINE_SQLITE_SYNCHRONOUS).
   */
  synchronous?: 'normal' | 'full';
  /** The write lock of another thread's connection to the same file (store/sqlite/thread-lock.ts). */
  threadLock?: SharedArrayBuffer;
  /**
   * `elsewhere`: this connection's commits never checkpoint the write-ahead log; a checkpointer thread
   * does (store/sqlite/checkpointer.ts). Default `auto`: SQLite's, inside whichever commit crosses
   * its threshold (what a one-shot command wants).
   */
  checkpoints?: 'auto' | 'elsewhere';
}

/** What the write-ahead log is cut back to when it restarts after growing past it. */
export const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * One writer at a time: every write, an emit's included, waits for the transaction under way, and a
 * statement costs microseconds with no round trip (docs/architecture.md, "Two stores").
 */
export const SQLITE_CAPABILITIES: Capabilities = {
  // With 1,000 subscribed endpoints a fan-out chunk of 256 held the writer ~8 ms at the median and
  // 24 ms at p99, a chunk of 64 ~2.6 and 5.5 ms, at the same drain rate.
  fanOutChunk: 64,
  // An empty write transaction takes the writer from the emits: a read that finds nothing needs no
  // write lock and no commit (WAL readers never wait).
  readBeforeWrite: true,
  // The emit's transaction holds the writer anyway: its message is written once, already fanned out,
  // instead of being read and rewritten by a worker's fan-out transaction.
  fanOutOnEmit: true,
  // A flush and a claim each paid a commit; together they pay one.
  claimWithOutcomes: 'every',
  // A claim costs microseconds and no round trip, and mostly rides with a flush (claimWithOutcomes).
  claimSpacingMs: 0,
};

/** Statements with more placeholders than this are not kept prepared (see prepare). */
const MAX_CACHED_PARAMETERS = 64;

export class SqliteDb implements Db {
  readonly dialect = 'sqlite' as const;
  readonly capabilities = SQLITE_CAPABILITIES;
  private readonly conn: Database.Database;
  private readonly cache = new Map<string, Prepared>();
  private lock: Promise<void> = Promise.resolve();
  private locked = false;
  /** Shared with the other threads of this process that write the same file; pass its buffer on. */
  readonly threadLock: ThreadLock;

  constructor(
    readonly file: string,
    options: SqliteOptions = {},
  ) {
    if (file !== ':memory:') preparePrivateDatabaseFile(file);
    this.conn = new Database(file);
    this.conn.pragma('journal_mode = WAL');
    this.conn.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    this.conn.pragma('busy_timeout = 5000');
    this.conn.pragma('foreign_keys = ON');
    // Under a sustained stream of commits the log cannot restart (each checkpoint ends with newer
    // frames already appended) and grows: 420 MB during a 100,000-event burst. When it next restarts,
    // it is cut back to this size instead of keeping its peak on disk (docs/architecture.md, "SQLite
    // checkpoints").
    this.conn.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    this.threadLock = new ThreadLock(options.threadLock);
    if (options.checkpoints === 'elsewhere') this.leaveCheckpoints();
  }

  /** Stops checkpointing inside commits: a checkpointer thread does it (store/sqlite/checkpointer.ts). */
  leaveCheckpoints(): void {
    this.conn.pragma('wal_autocheckpoint = 0');
  }

  /**
   * A long-running process's commits never checkpoint the log: a thread of its own does
   * (store/sqlite/checkpointer.ts). Its start (~50 ms, a new thread and isolate) overlaps the rest of
   * start-up; until it runs, the log just grows.
   */
  startMaintenance(): Promise<Maintenance> | null {
    if (this.file === ':memory:') return null;
    this.leaveCheckpoints();
    return SqliteCheckpointer.start(this.file);
  }

  /** The write lock, so that another thread's connection to the file takes turns with this one. */
  threadShare(): SharedArrayBuffer {
    return this.threadLock.buffer;
  }

  /** A commit costs the same for everyone here: HOOKLINE_SQLITE_SYNCHRONOUS decides for all. */
  forWorkers(): this {
    return this;
  }

  threadExited(threadId: number): void {
    this.threadLock.releaseThread(threadId);
  }

  private prepare(sql: string): Prepared {
    let prepared = this.cache.get(sql);
    if (!prepared) {
      const order: number[] = [];
      const rewritten = sql.replace(/\$(\d+)/g, (_m, n: string) => {
        order.push(Number(n) - 1);
        return '?';
      });
      prepared = { stmt: this.conn.prepare(rewritten), order };
      // Long IN or VALUES lists come in one text per list length: those are prepared each time
      // rather than kept, so the cache stays small (the hot statements take one JSON parameter).
      if (order.length <= MAX_CACHED_PARAMETERS) this.cache.set(sql, prepared);
    }
    return prepared;
  }

  private exec<T>(sql: string, params: readonly SqlValue[], mode: 'all' | 'run'): T[] | number {
    const { stmt, order } = this.prepare(sql);
    const args = order.map((i) => params[i] ?? null);
    if (mode === 'all') return stmt.reader ? (stmt.all(...args) as T[]) : (stmt.run(...args), []);
    return stmt.reader ? stmt.all(...args).length : stmt.run(...args).changes;
  }

  /** What a transaction's statements run through: straight to the connection, past the mutex. */
  private readonly inside: Queryable = this.direct();

  private direct(): Queryable {
    return {
      dialect: this.dialect,
      capabilities: this.capabilities,
      all: async <T>(sql: string, params: readonly SqlValue[] = []) =>
        this.exec<T>(sql, params, 'all') as T[],
      one: async <T>(sql: string, params: readonly SqlValue[] = []) =>
        (this.exec<T>(sql, params, 'all') as T[])[0],
      run: async (sql: string, params: readonly SqlValue[] = []) => this.exec(sql, params, 'run') as number,
    };
  }

  // Each wait re-checks the lock when it resumes and then acts without yielding: another
  // transaction may have started in between, and a statement must never run inside it.
  async all<T>(sql: string, params: readonly SqlValue[] = []): Promise<T[]> {
    while (this.locked) await this.lock;
    // Reads run at once (WAL readers never wait); a write goes through the write lock like a transaction.
    if (this.prepare(sql).stmt.readonly) return this.exec<T>(sql, params, 'all') as T[];
    return this.transaction((tx) => tx.all<T>(sql, params));
  }

  async one<T>(sql: string, params: readonly SqlValue[] = []): Promise<T | undefined> {
    return (await this.all<T>(sql, params))[0];
  }

  async run(sql: string, params: readonly SqlValue[] = []): Promise<number> {
    while (this.locked) await this.lock;
    if (this.prepare(sql).stmt.readonly) return this.exec(sql, params, 'run') as number;
    return this.transaction((tx) => tx.run(sql, params));
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.exclusive(async () => {
      // IMMEDIATE takes the write lock up front, so another process sharing the file waits
      // (busy_timeout) instead of failing half-way through.
      this.prepare('BEGIN IMMEDIATE').stmt.run();
      try {
        const result = await fn(this.inside);
        this.prepare('COMMIT').stmt.run();
        return result;
      } catch (err) {
        if (this.conn.inTransaction) this.conn.exec('ROLLBACK');
        throw err;
      }
    });
  }

  async compact(): Promise<void> {
    // VACUUM cannot run in a transaction; it takes SQLite's write lock itself, and this process's
    // other connections wait on the thread lock meanwhile. The checkpoint then empties the log, where
    // the rows' earlier versions were.
    await this.exclusive(() => {
      this.conn.exec('VACUUM');
      this.conn.pragma('wal_checkpoint(TRUNCATE)');
    });
  }

  /** Runs `fn` alone: no other statement of this connection, nor write of another thread, meanwhile. */
  private async exclusive<T>(fn: () => Promise<T> | T): Promise<T> {
    while (this.locked) await this.lock;
    let release!: () => void;
    this.locked = true;
    this.lock = new Promise<void>((resolve) => (release = resolve));
    let threadLocked = false;
    try {
      await this.threadLock.acquire();
      threadLocked = true;
      return await fn();
    } finally {
      if (threadLocked) this.threadLock.release();
      this.locked = false;
      release();
    }
  }

  async ping(): Promise<void> {
    await this.one('SELECT 1 AS ok');
  }

  async close(): Promise<void> {
    while (this.locked) await this.lock;
    if (this.conn.open) this.conn.close();
  }
}
