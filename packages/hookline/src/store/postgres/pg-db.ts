// PostgreSQL adapter of the Db boundary: a pg Pool. BIGINT (epoch-millisecond timestamps, counts)
// is parsed to number for this pool only; values stay far below 2^53.
import { createHash } from 'node:crypto';
import pg from 'pg';
import {
  isConnectionLoss,
  isLostRace,
  isOneOfFewShapes,
  type Capabilities,
  type Db,
  type Notifications,
  type Queryable,
  type SqlValue,
} from '../db.js';
import { SCHEMA_NAME_PATTERN } from '../../database-url.js';
import { scopedChannel } from './channel.js';
import { PgListener } from './listener.js';

const INT8_OID = 20;
const MAX_TRANSACTION_ATTEMPTS = 3;

/**
 * Limits every hookline session gets from the server (docs/operators.md, "PostgreSQL sessions"). A
 * process that stalls inside a transaction (SIGSTOP, a swapped-out VM, a debugger) would otherwise keep
 * its row locks, and with them every other worker's reaper and claims, for as long as it stalls: the
 * server ends such a session instead. hookline's transactions touch only the database and last
 * milliseconds, so these never cut into real work. Each may be overridden by a query parameter of the
 * same name in HOOKLINE_DATABASE_URL.
 */
export const SESSION_LIMITS = {
  /** Ends a session idle inside a transaction this long, releasing its locks. */
  idle_in_transaction_session_timeout: 10_000,
  /** A statement waiting this long for a lock gives up (55P03); its caller's loop tries again. */
  lock_timeout: 5_000,
  /** A runaway statement; generous, since retention and replays read and write in bulk. */
  statement_timeout: 60_000,
} as const;

/** How long a readiness probe waits for the database before calling it unreachable. */
const PING_TIMEOUT_MS = 5_000;
/** Waiting this long for a connection (the server gone, or the pool exhausted) fails the query. */
const CONNECT_TIMEOUT_MS = 10_000;

function parseInt8(value: string): number {
  return Number(value);
}

const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/**
 * Data statements run as named prepared statements: each connection parses and plans one once, then
 * reuses it (the claim's planning alone costs about as much as its execution). Statements whose text
 * varies without bound (IN lists of any length) are few; past the cap they simply go unnamed.
 */
const statementNames = new Map<string, string | null>();
const MAX_NAMED_STATEMENTS = 2000;
/**
 * Statements with long IN or VALUES lists come in one text per list length; each would stay prepared
 * on every connection. The hot statements take their batches as one JSON parameter and stay under this,
 * or come in a few shapes (db.ts, oneOfFewShapes: the messages' insert).
 */
const MAX_NAMED_PARAMETERS = 32;

function placeholderCount(sql: string): number {
  let max = 0;
  for (const m of sql.matchAll(/\$(\d+)/g)) max = Math.max(max, Number(m[1]));
  return max;
}

/** Bumped when a schema change has made prepared statements stale: every name is then new. */
let statementGeneration = 0;

function statementName(sql: string): string | undefined {
  let name = statementNames.get(sql);
  if (name === undefined) {
    const cacheable =
      /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i.test(sql) &&
      (placeholderCount(sql) <= MAX_NAMED_PARAMETERS || isOneOfFewShapes(sql)) &&
      statementNames.size < MAX_NAMED_STATEMENTS;
    name = cacheable
      ? `hl${statementGeneration}_${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`
      : null;
    statementNames.set(sql, name);
  }
  return name ?? undefined;
}

async function query(client: pg.Pool | pg.PoolClient, sql: string, params: readonly SqlValue[]) {
  try {
    return await client.query({ name: statementName(sql), text: sql, values: params as unknown[] });
  } catch (err) {
    // A migration by another process changed a table a prepared `SELECT *` reads ("cached plan must
    // not change result type"): prepare everything afresh under new names.
    if ((err as { code?: string }).code !== '0A000') throw err;
    statementGeneration++;
    statementNames.clear();
    return client.query({ name: statementName(sql), text: sql, values: params as unknown[] });
  }
}

/**
 * Writers wait only on the rows they share, and each statement is a round trip (docs/architecture.md,
 * "Two stores").
 */
export const POSTGRES_CAPABILITIES: Capabilities = {
  // A fan-out transaction holds its endpoints' queue rows from its queue update to its commit, and a
  // claim skips a queue row so held: fewer, larger transactions leave those rows free more of the
  // time. With 1,024 instead of 256, two workers drained one endpoint's backlog ~9 % faster, and
  // claims no longer came back empty through most of the fan-out.
  fanOutChunk: 1024,
  // An empty transaction costs only its own round trips; a read first would add one.
  readBeforeWrite: false,
  // A fan-out moves the endpoints' hot queue rows, which workers update up to 1,024 deliveries at a
  // time and an API process would update per group of emits: emits leave it to the workers, and a
  // group of emits is one insert, one round trip instead of three.
  fanOutOnEmit: false,
  // A flush of successes and a claim are each one statement outside any transaction already. A
  // flush that ends the head of a line is a transaction (store/deliveries.ts, recordSuccesses) and
  // holds the queue rows the next of the line waits on, which a worker's own claim skips: claimed
  // in the flush, the next goes at once. Under a flaky subscriber (bench keyed-lag-pg, 90 s) the key
  // handoff's p99 went from 304–310 ms to 226–254 ms.
  claimWithOutcomes: 'keyed',
  // The work signal's own debounce (store/work-signal.ts): a claim gathers what about one
  // notification's worth of emits brought, and a lone emit to an idle worker is claimed at once.
  claimSpacingMs: 5,
};

/**
 * The `options` startup parameter: the schema to work in, how commits wait and how prepared
 * statements are planned (PgDbOptions).
 */
function startupOptions(options: PgDbOptions): { options?: string } {
  const settings = [
    ...(options.schema ? [`-c search_path=${options.schema}`] : []),
    ...(options.synchronousCommit === false ? ['-c synchronous_commit=off'] : []),
    ...(options.genericPlans ? ['-c plan_cache_mode=force_generic_plan'] : []),
  ];
  return settings.length > 0 ? { options: settings.join(' ') } : {};
}

function queryable(client: pg.Pool | pg.PoolClient): Queryable {
  return {
    dialect: 'postgres',
    capabilities: POSTGRES_CAPABILITIES,
    all: async <T>(sql: string, params: readonly SqlValue[] = []) =>
      (await query(client, sql, params)).rows as T[],
    one: async <T>(sql: string, params: readonly SqlValue[] = []) =>
      (await query(client, sql, params)).rows[0] as T | undefined,
    run: async (sql: string, params: readonly SqlValue[] = []) =>
      (await query(client, sql, params)).rowCount ?? 0,
  };
}

export interface PgDbOptions {
  connectionString: string;
  /** The search_path of every connection: a test's schema, or `?schema=` of HOOKLINE_DATABASE_URL. */
  schema?: string;
  max?: number;
  /**
   * false: commits do not wait for the server to flush its log (synchronous_commit = off), for the
   * workers' transitions (Db.forWorkers).
   */
  synchronousCommit?: boolean;
  /**
   * true: a prepared statement is planned once per connection, whatever its parameters
   * (plan_cache_mode = force_generic_plan), for the workers' transitions (Db.forWorkers).
   */
  genericPlans?: boolean;
}

export class PgDb implements Db {
  readonly dialect = 'postgres' as const;
  readonly capabilities = POSTGRES_CAPABILITIES;
  readonly pool: pg.Pool;
  private readonly q: Queryable;
  readonly notifications: Notifications = {
    notify: async (channel, payload) => {
      // Prepared like every statement: an API sends one per group of emits, parsed afresh each time.
      await query(this.pool, 'SELECT pg_notify($1, $2)', [await this.scoped(channel), payload]);
    },
    listen: async (channel, onNotify, log) => {
      const listener = new PgListener(this.pool.options, () => this.scoped(channel), onNotify, log);
      await listener.start();
      return () => listener.close();
    },
  };

  private schema: Promise<string> | null = null;

  /**
   * A channel of this installation's own (store/postgres/channel.ts). With the schema named in the
   * options, from it: the schema may not exist yet when the first worker starts listening (migrate
   * creates it), and current_schema() would then answer null.
   */
  private async scoped(channel: string): Promise<string> {
    if (this.namedSchema !== null) return scopedChannel(channel, this.namedSchema);
    if (!this.schema) {
      this.schema = this.one<{ schema: string }>('SELECT current_schema() AS schema').then(
        (r) => r?.schema ?? 'public',
      );
      // Not kept when it failed: the next notification or reconnection asks again.
      this.schema.catch(() => (this.schema = null));
    }
    return scopedChannel(channel, await this.schema);
  }

  /** The schema the options name, when it is one name (a test's or `?schema=`'s). */
  private readonly namedSchema: string | null;

  /** The pool of Db.forWorkers, opened when first asked for. */
  private workers: PgDb | null = null;

  constructor(private readonly options: PgDbOptions) {
    this.namedSchema = options.schema && SCHEMA_NAME_PATTERN.test(options.schema) ? options.schema : null;
    // Startup parameters, not SET statements: no round trip, and values in the URL win (pg merges the
    // connection string over these).
    this.pool = new pg.Pool({
      ...SESSION_LIMITS,
      connectionString: options.connectionString,
      max: options.max ?? 10,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      types,
      ...startupOptions(options),
    });
    // An idle client that loses its connection emits 'error' on the pool; without a listener that
    // would crash the process. The next query gets a fresh connection.
    this.pool.on('error', () => {});
    this.q = queryable(this.pool);
  }

  all<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]> {
    return this.q.all<T>(sql, params);
  }

  one<T>(sql: string, params?: readonly SqlValue[]): Promise<T | undefined> {
    return this.q.one<T>(sql, params);
  }

  run(sql: string, params?: readonly SqlValue[]): Promise<number> {
    return this.q.run(sql, params);
  }

  /**
   * Runs `fn` in a transaction. Transactions that lock the same rows in different orders (deleting an
   * endpoint while a worker records outcomes of its deliveries) can deadlock; PostgreSQL then aborts
   * one of them, and that one is simply run again. So is one whose connection was lost before COMMIT
   * (after it, the outcome is unknown and the error goes to the caller). `fn` must therefore touch
   * only the database.
   */
  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.pool.connect();
      // The pool listens for errors only on idle clients. A checked-out one whose session the server
      // ends between statements (idle_in_transaction_session_timeout after this process stalled, a
      // restart) emits 'error' with no query to take it: unheard, that would crash the process.
      let lost: Error | null = null;
      const onError = (err: Error) => (lost ??= err);
      client.on('error', onError);
      let committing = false;
      try {
        await client.query('BEGIN');
        const result = await fn(queryable(client));
        committing = true;
        await client.query('COMMIT');
        return result;
      } catch (err) {
        if (isConnectionLoss(err)) lost ??= err as Error;
        if (!lost) await client.query('ROLLBACK').catch((e: Error) => (lost ??= e));
        const retry = isLostRace(err) || (!committing && isConnectionLoss(err));
        if (attempt >= MAX_TRANSACTION_ATTEMPTS || !retry) throw err;
      } finally {
        client.off('error', onError);
        // A broken connection is discarded, not handed to the next caller.
        client.release(lost ?? undefined);
      }
      await new Promise((r) => setTimeout(r, Math.random() * 20 * attempt));
    }
  }

  /** Readiness: a probe must answer, so a database that does not answer in time counts as down. */
  async ping(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('the database did not answer in time')), PING_TIMEOUT_MS);
    });
    try {
      await Promise.race([this.pool.query('SELECT 1'), deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.workers?.close();
    await this.pool.end();
  }

  /**
   * A pool of its own whose commits do not wait for the log flush. Claims, flushes of outcomes and
   * fan-outs all write their endpoint's queue row, and a row lock is held until the commit is on disk:
   * waiting for the disk there made every writer of a busy endpoint queue up behind one fsync after
   * another (docs/architecture.md, "Commits the workers do not wait for").
   *
   * Its prepared statements are planned once. Left to choose, PostgreSQL plans a statement afresh at
   * every execution when its first five custom plans cost less than the generic one, and a claim
   * whose first executions took one delivery each (an idle worker woken by one emit) was planned at
   * every claim from then on: ~600 µs of the primary's CPU per claim, against ~30 µs per claimed
   * delivery (docs/architecture.md, "Claiming"). The workers' statements find their rows by key
   * whatever the plan (store/db.ts, notIndexed).
   */
  forWorkers(): PgDb {
    if (this.options.synchronousCommit === false) return this;
    return (this.workers ??= new PgDb({ ...this.options, synchronousCommit: false, genericPlans: true }));
  }

  /** The server checkpoints its own log. */
  startMaintenance(): null {
    return null;
  }

  /** Each thread opens its own pool; the server keeps their writes apart. */
  threadShare(): null {
    return null;
  }

  threadExited(): void {}
}
