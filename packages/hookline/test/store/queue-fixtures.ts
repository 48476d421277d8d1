// Rows for the store-level queue suites, written straight into a freshly migrated database: endpoints
// with their queues, one message per delivery (so a claim's payload can be matched to its delivery),
// and deliveries inserted by the store's own insertDeliveries. Times are explicit epoch milliseconds
// around T0; nothing here sleeps or reads the clock.
import type { ClaimedAttempt, SuccessRecord } from '../../src/store/attempts.js';
import type { Db, Queryable } from '../../src/store/db.js';
import {
  claimDeliveries,
  insertDeliveries,
  type DeliveryRow,
  type DeliveryStatus,
} from '../../src/store/deliveries.js';
import {
  createQueue,
  type EndpointQueueRow,
  type QueueSettlement,
  emptySettlement,
} from '../../src/store/endpoint-queues.js';
import { migrate } from '../../src/store/migrations/index.js';
import { createTestDatabase, type StoreKind, type TestDatabase } from '../helpers/stores.js';

/** A fixed "now" for every suite: the store functions take their time as a parameter. */
export const T0 = 1_700_000_000_000;
/** Well above the adaptive limit, so only the queue's own limit counts unless a test says otherwise. */
export const CEILING = 1000;
export const LEASE_MS = 30_000;

export interface QueueStore {
  database: TestDatabase;
  db: Db;
  /** Opens another connection (PostgreSQL: another pool) to the same database. */
  open(): Db;
  close(): Promise<void>;
}

/** A fresh database (SQLite file or PostgreSQL schema) with every migration applied. */
export async function openQueueStore(kind: StoreKind): Promise<QueueStore> {
  const database = await createTestDatabase(kind);
  const opened: Db[] = [];
  const open = () => {
    const db = database.open();
    opened.push(db);
    return db;
  };
  const db = open();
  await migrate(db);
  return {
    database,
    db,
    open,
    close: async () => {
      for (const d of opened.splice(0).reverse()) await d.close();
      await database.drop();
    },
  };
}

export interface TestEndpoint {
  id: string;
  url: string;
  secret: Buffer;
}

/** An active endpoint row and its (empty) queue. */
export async function addEndpoint(db: Db, id: string): Promise<TestEndpoint> {
  const endpoint = { id, url: `http://127.0.0.1:9/${id}`, secret: Buffer.from(`secret of ${id}`) };
  await db.transaction(async (tx) => {
    await tx.run(
      `INSERT INTO endpoints (id, tenant_id, url, events, status, secret, created_at, updated_at)
       VALUES ($1, 'acme', $2, '["*"]', 'active', $3, $4, $4)`,
      [endpoint.id, endpoint.url, endpoint.secret, T0],
    );
    await createQueue(tx, endpoint.id);
  });
  return endpoint;
}

/** The payload stored for a delivery's message: unique per delivery. */
export function payloadOf(deliveryId: string): Buffer {
  return Buffer.from(`payload of ${deliveryId}`);
}

/**
 * Pending deliveries for one endpoint, one per due time, with ids `<endpoint>-<prefix><index>` (zero
 * padded, so id order is insertion order). Each gets its own message. Answers the ids in order.
 */
export async function addDeliveries(
  db: Db,
  endpointId: string,
  dueTimes: readonly number[],
  prefix = 'd',
  /** Ordering keys, one per delivery (null: unkeyed); each keyed one's place in line is its index. */
  keys: readonly (string | null)[] = [],
  firstSeq = 1,
): Promise<string[]> {
  return db.transaction((tx) => addDeliveriesWithin(tx, endpointId, dueTimes, prefix, keys, firstSeq));
}

/** addDeliveries in the caller's transaction. */
export async function addDeliveriesWithin(
  tx: Queryable,
  endpointId: string,
  dueTimes: readonly number[],
  prefix = 'd',
  keys: readonly (string | null)[] = [],
  firstSeq = 1,
): Promise<string[]> {
  const ids = dueTimes.map((_, i) => `${endpointId}-${prefix}${String(i).padStart(5, '0')}`);
  for (let start = 0; start < ids.length; start += 500) {
    const chunk = ids.slice(start, start + 500);
    const params: (string | number | Buffer)[] = [];
    const tuples = chunk.map((id, i) => {
      params.push(`msg-${id}`, payloadOf(id));
      return `($${2 * i + 1}, 'acme', 'user.updated', $${2 * i + 2}, ${T0})`;
    });
    await tx.run(
      `INSERT INTO messages (id, tenant_id, event_type, payload, created_at)
       VALUES ${tuples.join(', ')}`,
      params,
    );
  }
  await insertDeliveries(
    tx,
    ids.map((id, i) => ({
      id,
      message_id: `msg-${id}`,
      endpoint_id: endpointId,
      tenant_id: 'acme',
      event_type: 'user.updated',
      next_attempt_at: dueTimes[i]!,
      replay_of: null,
      first_headers: null,
      ordering_key: keys[i] ?? null,
      ordering_seq: keys[i] == null ? null : firstSeq + i,
    })),
    T0,
  );
  return ids;
}

/** `count` deliveries all due at `due`. */
export function dueTimes(count: number, due = T0 - 1000): number[] {
  return Array.from({ length: count }, () => due);
}

export type QueueState = Omit<EndpointQueueRow, 'endpoint_id'>;

/** One endpoint's queue row, every column a number (or null) whichever driver read it. */
export async function queueOf(db: Db, endpointId: string): Promise<QueueState> {
  const row = await db.one<Record<string, unknown>>('SELECT * FROM endpoint_queues WHERE endpoint_id = $1', [
    endpointId,
  ]);
  if (!row) throw new Error(`no queue row for ${endpointId}`);
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    active: Number(row.active),
    queued: Number(row.queued),
    next_due_at: n(row.next_due_at),
    in_flight: Number(row.in_flight),
    concurrency_limit: Number(row.concurrency_limit),
    concurrency_credit: Number(row.concurrency_credit),
    slow_start_threshold: Number(row.slow_start_threshold),
    last_decrease_at: n(row.last_decrease_at),
    answer_ms_recent: n(row.answer_ms_recent),
    answer_ms_floor: n(row.answer_ms_floor),
    answer_slow_since: n(row.answer_slow_since),
    paused_until: n(row.paused_until),
    rate_interval_us: n(row.rate_interval_us),
    rate_tolerance_us: n(row.rate_tolerance_us),
    rate_tat_us: n(row.rate_tat_us),
    throttled_until: n(row.throttled_until),
    ready_at: n(row.ready_at),
  };
}

export type DeliveryState = Pick<
  DeliveryRow,
  | 'id'
  | 'status'
  | 'attempts'
  | 'next_attempt_at'
  | 'lease_expires_at'
  | 'last_status'
  | 'last_error'
  | 'first_headers'
  | 'completed_at'
>;

/** The rows of the given deliveries, in the order of `ids`. */
export async function deliveriesOf(db: Db, ids: readonly string[]): Promise<DeliveryState[]> {
  const out: DeliveryState[] = [];
  for (const id of ids) {
    const r = await db.one<Record<string, unknown>>(
      `SELECT id, status, attempts, next_attempt_at, lease_expires_at, last_status, last_error, first_headers,
         completed_at FROM deliveries WHERE id = $1`,
      [id],
    );
    if (!r) throw new Error(`no delivery ${id}`);
    const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
    out.push({
      id: String(r.id),
      status: r.status as DeliveryStatus,
      attempts: Number(r.attempts),
      next_attempt_at: Number(r.next_attempt_at),
      lease_expires_at: n(r.lease_expires_at),
      last_status: n(r.last_status),
      last_error: (r.last_error as string | null) ?? null,
      first_headers: (r.first_headers as string | null) ?? null,
      completed_at: n(r.completed_at),
    });
  }
  return out;
}

/** How many deliveries of an endpoint are in each status. */
export async function statusCounts(
  db: Db,
  endpointId: string,
): Promise<Partial<Record<DeliveryStatus, number>>> {
  const rows = await db.all<{ status: DeliveryStatus; n: number | string }>(
    'SELECT status, COUNT(*) AS n FROM deliveries WHERE endpoint_id = $1 GROUP BY status',
    [endpointId],
  );
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

/** A settlement that changes nothing but what `s` says. */
export function settlement(
  endpointId: string,
  s: Partial<Omit<QueueSettlement, 'endpoint_id'>>,
): QueueSettlement {
  return { ...emptySettlement(endpointId), ...s };
}

/** A claim at `now` with the suites' lease and ceiling unless given. */
export function claimAt(
  db: Db,
  now: number,
  limit = 100,
  o: { ceiling?: number; leaseUntil?: number } = {},
): Promise<ClaimedAttempt[]> {
  return claimDeliveries(db, {
    now,
    leaseUntil: o.leaseUntil ?? now + LEASE_MS,
    limit,
    ceiling: o.ceiling ?? CEILING,
  });
}

/** Sorted ids of claimed or returned rows. */
/** A claimed attempt's 200, as a flush records it (quick, no answer time), for recordSuccesses. */
export function successOf(
  c: Pick<ClaimedAttempt, 'id' | 'attempts' | 'endpoint_id' | 'ordering_key'>,
): SuccessRecord {
  return {
    id: c.id,
    attempt: c.attempts,
    status: 200,
    endpoint_id: c.endpoint_id,
    tenant_id: 'acme',
    fast: true,
    answerMs: null,
    ordering_key: c.ordering_key,
  };
}

export function idsOf(rows: readonly { id: string }[]): string[] {
  return rows.map((r) => r.id).sort();
}
