// The plans PostgreSQL keeps for the queue's transitions (docs/architecture.md, "Prepared plans"). Each
// connection prepares a statement once and, after a few runs, keeps one generic plan for good. A plan
// made while the queue was quiet must still take a backlog batch by batch: the claim and the outcomes'
// fences find their deliveries by primary key, never by scanning the pending or leased set they check
// the status against. (SQLite plans every statement from its rules, not from the table's sizes.)
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Db, Queryable, SqlValue } from '../../src/store/db.js';
import {
  claimDeliveries,
  completeDeliveries,
  failDeliveries,
  recordSuccesses,
} from '../../src/store/deliveries.js';
import type { ClaimedAttempt } from '../../src/store/attempts.js';
import { insertMessages, type MessageRow } from '../../src/store/messages.js';
import { PgDb } from '../../src/store/postgres/pg-db.js';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';
import {
  CEILING,
  LEASE_MS,
  T0,
  addDeliveries,
  addEndpoint,
  dueTimes,
  openQueueStore,
  type QueueStore,
} from './queue-fixtures.js';

interface Statement {
  sql: string;
  params: readonly SqlValue[];
}

/** A Db that sends everything on to `db` and notes each statement's text and parameters. */
function recording(db: Db): { db: Db; statements: Statement[] } {
  const statements: Statement[] = [];
  const wrap = (q: Queryable): Queryable => ({
    dialect: q.dialect,
    capabilities: q.capabilities,
    all: (sql, params = []) => (statements.push({ sql, params }), q.all(sql, params)),
    one: (sql, params = []) => (statements.push({ sql, params }), q.one(sql, params)),
    run: (sql, params = []) => (statements.push({ sql, params }), q.run(sql, params)),
  });
  const recorded = Object.assign(Object.create(db) as Db, wrap(db), {
    transaction: <T>(fn: (tx: Queryable) => Promise<T>) => db.transaction((tx) => fn(wrap(tx))),
  });
  return { db: recorded, statements };
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Parent Relationship'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  Plans?: PlanNode[];
}

/** Every node of a plan tree. */
function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)];
}

describe.runIf(STORE_KINDS.includes('postgres'))('PostgreSQL plans of the queue transitions', () => {
  let store: QueueStore;
  let admin: pg.Client;
  beforeEach(async () => {
    store = await openQueueStore('postgres');
    admin = new pg.Client({ connectionString: PG_URL, options: `-c search_path=${store.database.schema}` });
    await admin.connect();
    await admin.query('SET plan_cache_mode = force_generic_plan');
  });
  afterEach(async () => {
    await admin.end();
    await store.close();
  });

  /** The generic plan of a recorded statement; with `analyze`, run (its changes made) and counted. */
  async function planOf({ sql, params }: Statement, analyze = false): Promise<PlanNode> {
    await admin.query(`PREPARE s AS ${sql}`);
    const literal = (v: SqlValue) =>
      v === null ? 'NULL' : typeof v === 'number' ? String(v) : admin.escapeLiteral(String(v));
    const { rows } = await admin.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `EXPLAIN (FORMAT JSON${analyze ? ', ANALYZE, TIMING OFF' : ''}) EXECUTE s(${params.map(literal).join(', ')})`,
    );
    await admin.query('DEALLOCATE s');
    return rows[0]!['QUERY PLAN'][0].Plan;
  }

  /**
   * How each UPDATE of `deliveries` in the statement finds its rows, under the generic plan a
   * connection would keep: one "<scan> <index>" per scan of the table feeding the update.
   */
  async function updateScans(statement: Statement): Promise<string[]> {
    const updates = nodesOf(await planOf(statement)).filter(
      (n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'deliveries',
    );
    // The rows an update changes come from its outer input; its init plans compute parameters.
    const feeding = (n: PlanNode): PlanNode[] =>
      (n.Plans ?? []).filter((c) => c['Parent Relationship'] !== 'InitPlan').flatMap(nodesOf);
    return updates.flatMap((u) =>
      feeding(u)
        .filter((n) => n['Relation Name'] === 'deliveries' || n['Node Type'] === 'Bitmap Index Scan')
        .map((n) => `${n['Node Type']} ${n['Index Name'] ?? ''}`.trim()),
    );
  }

  /** A quiet queue over a long history: 4,000 finished deliveries, and 10 waiting at `endpointId`. */
  async function quietQueue(endpointId: string): Promise<void> {
    await addEndpoint(store.db, endpointId);
    await addDeliveries(store.db, endpointId, dueTimes(4000), 'old');
    await store.db.run(`UPDATE deliveries SET status = 'succeeded', completed_at = $1`, [T0]);
    await addDeliveries(store.db, endpointId, dueTimes(10));
    await admin.query('VACUUM ANALYZE deliveries');
  }

  const claimQuietly = async (db: Db): Promise<ClaimedAttempt[]> =>
    claimDeliveries(db, { now: T0, leaseUntil: T0 + LEASE_MS, limit: 100, ceiling: CEILING });

  it('claims by primary key, not by scanning the pending deliveries', async () => {
    await quietQueue('ep-a');
    const { db, statements } = recording(store.db);
    expect(await claimQuietly(db)).toHaveLength(8); // the adaptive limit's start
    expect(statements).toHaveLength(1);
    expect(await updateScans(statements[0]!)).toEqual(['Index Scan deliveries_pkey']);
  });

  it('a claim reads about its limit of deliveries and writes only the queues it takes from, however many are ready', async () => {
    // 60 endpoints with 20 due deliveries each; a claim of 40 takes 8 (the adaptive limit's start) from
    // each of the first five in ready order, and locks 40 ready queues (it cannot know how many it
    // needs before it has them).
    const endpoints = Array.from({ length: 60 }, (_, i) => `ep-${String(i).padStart(2, '0')}`);
    for (const id of endpoints) {
      await addEndpoint(store.db, id);
      await addDeliveries(store.db, id, dueTimes(20));
    }
    const { db, statements } = recording(store.db);
    const first = await claimDeliveries(db, {
      now: T0,
      leaseUntil: T0 + LEASE_MS,
      limit: 40,
      ceiling: CEILING,
    });
    const perEndpoint = (claimed: readonly ClaimedAttempt[]) =>
      [...new Set(claimed.map((c) => c.endpoint_id))].map(
        (id) => claimed.filter((c) => c.endpoint_id === id).length,
      );
    expect(perEndpoint(first)).toEqual([8, 8, 8, 8, 8]);
    const versions = async () =>
      new Map(
        (
          await admin.query<{ endpoint_id: string; xmin: string }>(
            'SELECT endpoint_id, xmin FROM endpoint_queues',
          )
        ).rows.map((r) => [r.endpoint_id, r.xmin]),
      );
    const before = await versions();
    // The same claim again, counted: the next five endpoints' 40.
    const plan = await planOf(statements[0]!, true);
    const pendingRead = nodesOf(plan)
      .filter((n) => n['Index Name'] === 'deliveries_pending_by_endpoint')
      .reduce((sum, n) => sum + n['Actual Rows']! * n['Actual Loops']!, 0);
    // Each endpoint taken from gives one row more than it is asked for: its next due time.
    expect(pendingRead).toBe(45);
    const after = await versions();
    const written = endpoints.filter((id) => before.get(id) !== after.get(id));
    expect(written).toHaveLength(5);
    // Five others than the first claim's, which are at their limit now.
    expect(written.filter((id) => first.some((c) => c.endpoint_id === id))).toEqual([]);
  });

  it("plans the workers' claims once per connection, even when their first runs were cheap", async () => {
    // One connection, so pg_prepared_statements shows the one that claimed.
    const owner = new PgDb({ connectionString: PG_URL, schema: store.database.schema!, max: 1 });
    const workers = owner.forWorkers();
    try {
      await addEndpoint(store.db, 'ep-a');
      // An idle worker woken by single emits: left to choose, PostgreSQL found each custom plan of
      // these cheaper than the generic one and planned the claim afresh every time.
      for (let i = 0; i < 20; i++)
        await claimDeliveries(workers, { now: T0, leaseUntil: T0 + LEASE_MS, limit: 1, ceiling: CEILING });
      const plans = await workers.all<{ generic_plans: number; custom_plans: number }>(
        `SELECT generic_plans, custom_plans FROM pg_prepared_statements
         WHERE statement LIKE '%WITH ready AS%' AND statement NOT LIKE '%pg_prepared_statements%'`,
      );
      expect(plans.map((p) => [Number(p.generic_plans), Number(p.custom_plans)])).toEqual([[20, 0]]);
    } finally {
      await owner.close();
    }
  });

  it('fences outcomes by primary key, not by scanning the deliveries in flight', async () => {
    await quietQueue('ep-a');
    const claimed = await claimQuietly(store.db);
    const [a, b, c] = claimed;
    await admin.query('ANALYZE deliveries');
    const { db, statements } = recording(store.db);
    await completeDeliveries(db, [{ id: a!.id, attempt: a!.attempts, status: 204 }], T0);
    await failDeliveries(
      db,
      [
        {
          id: b!.id,
          attempt: b!.attempts,
          status: 500,
          error: 'HTTP 500',
          response: null,
          retryAt: T0 + 1000,
          firstHeaders: null,
        },
      ],
      T0,
    );
    await recordSuccesses(
      db,
      [
        {
          id: c!.id,
          attempt: c!.attempts,
          status: 204,
          endpoint_id: 'ep-a',
          tenant_id: 'acme',
          fast: true,
          answerMs: null,
          ordering_key: null,
        },
      ],
      T0,
      CEILING,
    );
    const fenced = statements.filter(
      (s) => /^\s*(WITH|UPDATE)\b/.test(s.sql) && /UPDATE deliveries/.test(s.sql),
    );
    expect(fenced).toHaveLength(3);
    const scans = [];
    for (const statement of fenced) scans.push(await updateScans(statement));
    expect(scans).toEqual(fenced.map(() => ['Index Scan deliveries_pkey']));
  });

  it('prepares the notification an emit sends', async () => {
    const api = new PgDb({ connectionString: PG_URL, schema: store.database.schema!, max: 1 });
    try {
      for (let i = 0; i < 3; i++) await api.notifications!.notify('fanout', '');
      const prepared = await api.all<{ statement: string }>(
        `SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%pg_notify%'
         AND statement NOT LIKE '%pg_prepared_statements%'`,
      );
      expect(prepared).toHaveLength(1);
    } finally {
      await api.close();
    }
  });

  it("prepares the messages' insert once per power of two of rows, whatever the group's size", async () => {
    // One connection, so pg_prepared_statements shows the one that inserted.
    const api = new PgDb({ connectionString: PG_URL, schema: store.database.schema!, max: 1 });
    try {
      let n = 0;
      const group = (size: number, key: string | null): MessageRow[] =>
        Array.from({ length: size }, () => ({
          id: `msg_plans_${++n}`,
          tenant_id: 'acme',
          event_type: 'user.created',
          payload: Buffer.from('{}'),
          idempotency_key: null,
          idempotency_fingerprint: null,
          created_at: T0,
          ordering_key: key,
          ordering_key_sealed: key === null ? null : Buffer.from(key),
          trace_context: null,
          awaits_fanout: true,
        }));
      // Groups of 5 to 8 are one text (8 rows, the padding left out), keyed or not; a group of 3 another.
      for (const size of [5, 6, 7, 8, 3]) await insertMessages(api, group(size, null));
      const seqs = await insertMessages(api, group(6, 'k'));
      expect(seqs).toEqual([...seqs].sort((a, b) => a! - b!));
      expect(new Set(seqs).size).toBe(6);
      const prepared = await api.all<{ statement: string }>(
        `SELECT statement FROM pg_prepared_statements
         WHERE statement LIKE '%INSERT INTO messages%' AND statement NOT LIKE '%pg_prepared_statements%'`,
      );
      expect(prepared).toHaveLength(2);
      const counts = await api.all<{ messages: number; queued: number }>(
        'SELECT (SELECT COUNT(*) FROM messages) AS messages, (SELECT COUNT(*) FROM fanout_queue) AS queued',
      );
      expect(counts.map((c) => [Number(c.messages), Number(c.queued)])).toEqual([[35, 35]]);
    } finally {
      await api.close();
    }
  });
});
