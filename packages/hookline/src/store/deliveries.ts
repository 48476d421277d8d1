// Every state transition of a delivery, each one set-based statement whatever the batch size
// (docs/architecture.md, "The life of a delivery"). The attempt number doubles as a fencing token: an
// outcome is written only `WHERE status = 'delivering' AND attempts = <the attempt it ran>`, so a
// worker whose lease expired cannot overwrite a newer attempt of the same delivery. Each transition
// keeps the endpoint queues' counters in step (store/endpoint-queues.ts).
import {
  blobFromHex,
  forUpdate,
  jsonRecords,
  least,
  limitParam,
  notIndexed,
  placeholders,
  type Db,
  type Dialect,
  type Queryable,
} from './db.js';
import { reopenDeadLetters } from './dead-letters.js';
import type { AttemptRef, ClaimOptions, ClaimedAttempt, FencedRow, SuccessRecord } from './attempts.js';
import { BUCKET_MS, addStats, emptyStats, type StatsIncrement } from './delivery-stats.js';
import {
  addAnswer,
  arrivalsOf,
  clearQueue,
  emptySettlement,
  enqueue,
  enqueueStatement,
  lockQueues,
  bringDueForward,
  settleQueues,
  type QueueSettlement,
} from './endpoint-queues.js';
import { recordSuccessesPostgres } from './postgres/record-successes.js';
import { claimPostgres } from './postgres/claim.js';
import { claimSqlite, claimWithin } from './sqlite/claim.js';

/** `held`: waiting behind an earlier delivery of its ordering key to the same endpoint. */
export const DELIVERY_STATUSES = ['held', 'pending', 'delivering', 'succeeded', 'dead', 'cancelled'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

export interface DeliveryRow {
  id: string;
  message_id: string;
  endpoint_id: string;
  tenant_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: number;
  lease_expires_at: number | null;
  last_status: number | null;
  /** Why the last attempt failed, in hookline's own words (engine/last-error.ts). */
  last_error: string | null;
  /** The start of the subscriber's answer to it, sealed (engine/last-error.ts); null if none. */
  last_response: Buffer | null;
  /** JSON of the headers of attempt 1, kept for the dead-letter record ("as first sent"). */
  first_headers: string | null;
  replay_of: string | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
  ordering_key: string | null;
  /**
   * Place in its key's line: numbered as fan-out saw its message (engine/fanout.ts), or later for a
   * replay.
   */
  ordering_seq: number | null;
}

export type NewDelivery = Pick<
  DeliveryRow,
  | 'id'
  | 'message_id'
  | 'endpoint_id'
  | 'tenant_id'
  | 'event_type'
  | 'next_attempt_at'
  | 'replay_of'
  | 'first_headers'
  | 'ordering_key'
  | 'ordering_seq'
>;

const INSERT_DELIVERY = `INSERT INTO deliveries (id, message_id, endpoint_id, tenant_id, event_type,
  next_attempt_at, replay_of, first_headers, status, ordering_key, ordering_seq, created_at, updated_at)`;
/** SQLite's one-row insert: one text, so the prepared-statement cache finds it without building it per row. */
const INSERT_DELIVERY_ROW = `${INSERT_DELIVERY} VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`;

const NEW_DELIVERY_COLUMNS = {
  item_id: 'text',
  item_message: 'text',
  item_endpoint: 'text',
  item_tenant: 'text',
  item_type: 'text',
  item_due: 'bigint',
  item_replay_of: 'text',
  item_headers: 'text',
  item_key: 'text',
  item_seq: 'bigint',
} as const;

/** One line: an endpoint and an ordering key. */
interface Line {
  endpoint_id: string;
  ordering_key: string;
}

const lineId = (l: { endpoint_id: string; ordering_key: string | null }) =>
  `${l.endpoint_id}\u0000${l.ordering_key}`;

const LINE_COLUMNS = { item_endpoint: 'text', item_key: 'text' } as const;
/**
 * The partial index's own predicate, word for word, so both engines use deliveries_open_by_line: a
 * delivery is unfinished (pending, delivering or held) exactly while it has no completion time, and
 * the claims and promotions that move it between those states leave the index alone.
 */
const OPEN_IN_LINE = 'completed_at IS NULL';

/**
 * Lines that already have an unfinished delivery (docs/architecture.md, "Ordering keys"). SQLite's
 * path: its one writer keeps a new delivery and the end of the one before it from missing each other
 * (PostgreSQL's insertDeliveriesPostgres locks the queue rows for that).
 */
async function openLines(q: Queryable, lines: readonly Line[]): Promise<Set<string>> {
  const t = jsonRecords(q.dialect, 1, LINE_COLUMNS);
  const rows = await q.all<Line>(
    `SELECT t.item_endpoint AS endpoint_id, t.item_key AS ordering_key FROM ${t}
     WHERE EXISTS (SELECT 1 FROM deliveries d WHERE d.endpoint_id = t.item_endpoint
       AND d.ordering_key = t.item_key AND d.${OPEN_IN_LINE})`,
    [JSON.stringify(lines.map((l) => ({ item_endpoint: l.endpoint_id, item_key: l.ordering_key })))],
  );
  return new Set(rows.map(lineId));
}

/**
 * Inserts new deliveries and counts them into their queues. A keyed delivery joins the back of its
 * line: pending if the line was empty, otherwise held until the ones before it end (advanceLines).
 */
export async function insertDeliveries(
  q: Queryable,
  rows: readonly NewDelivery[],
  now: number,
): Promise<void> {
  if (rows.length === 0) return;
  if (q.dialect === 'postgres') return insertDeliveriesPostgres(q, rows, now);
  const held = await heldInLines(q, rows);
  await writeDeliveries(q, rows, (r) => (held.has(r) ? 'held' : 'pending'), now);
  await enqueue(q, arrivalsOf(rows.map((r) => (held.has(r) ? { ...r, status: 'held' } : r))));
}

/**
 * insertDeliveries on PostgreSQL: the rows inserted, each placed in its line, and counted into their
 * queues in one statement. Keyed rows lock their queue rows first, in a statement of its own, so that
 * this one's snapshot is taken under the locks and sees every line head ended before (a snapshot
 * taken while waiting for them could miss one, and hold a delivery behind a head that is gone). The
 * queue rows stay locked from here to the commit: two round trips, where a statement each took four.
 * One JSON parameter, one statement text: prepared once per connection, where a VALUES list is a new
 * text (parsed and planned again) for every length, and thousands of bound values a time.
 */
async function insertDeliveriesPostgres(
  q: Queryable,
  rows: readonly NewDelivery[],
  now: number,
): Promise<void> {
  if (rows.some((r) => r.ordering_key !== null))
    await lockQueues(
      q,
      rows.map((r) => r.endpoint_id),
    );
  const t = jsonRecords(q.dialect, 1, NEW_DELIVERY_COLUMNS);
  await q.run(
    `WITH placed AS (
       SELECT t.*, CASE WHEN t.item_key IS NOT NULL AND (
           ROW_NUMBER() OVER (PARTITION BY t.item_endpoint, t.item_key ORDER BY t.item_seq) > 1
           OR EXISTS (SELECT 1 FROM deliveries d WHERE d.endpoint_id = t.item_endpoint
             AND d.ordering_key = t.item_key AND d.${OPEN_IN_LINE}))
         THEN 'held' ELSE 'pending' END AS item_status
       FROM ${t}
     ), inserted AS (
       ${INSERT_DELIVERY}
       SELECT item_id, item_message, item_endpoint, item_tenant, item_type, item_due, item_replay_of,
         item_headers, item_status, item_key, item_seq, $2, $2
       FROM placed
       RETURNING endpoint_id, status, next_attempt_at
     )
     ${enqueueStatement(`SELECT endpoint_id, COUNT(*),
       MIN(CASE WHEN status = 'held' THEN NULL ELSE next_attempt_at END)
       FROM inserted GROUP BY endpoint_id ORDER BY endpoint_id`)}`,
    [
      JSON.stringify(
        rows.map((r) => ({
          item_id: r.id,
          item_message: r.message_id,
          item_endpoint: r.endpoint_id,
          item_tenant: r.tenant_id,
          item_type: r.event_type,
          item_due: r.next_attempt_at,
          item_replay_of: r.replay_of,
          item_headers: r.first_headers,
          item_key: r.ordering_key ?? null,
          item_seq: r.ordering_seq ?? null,
        })),
      ),
      now,
    ],
  );
}

/**
 * The keyed rows that wait behind an earlier delivery of their line, already there or in `rows`
 * (SQLite; see openLines).
 */
async function heldInLines(q: Queryable, rows: readonly NewDelivery[]): Promise<Set<NewDelivery>> {
  const keyed = rows.filter((r) => r.ordering_key !== null);
  const held = new Set<NewDelivery>();
  if (keyed.length === 0) return held;
  const lines = new Map<string, NewDelivery[]>();
  for (const r of keyed) {
    const id = lineId(r);
    const line = lines.get(id);
    if (line) line.push(r);
    else lines.set(id, [r]);
  }
  const open = await openLines(
    q,
    [...lines.values()].map((l) => ({ endpoint_id: l[0]!.endpoint_id, ordering_key: l[0]!.ordering_key! })),
  );
  for (const [id, line] of lines) {
    line.sort((a, b) => a.ordering_seq! - b.ordering_seq!);
    line.forEach((r, i) => {
      if (i > 0 || open.has(id)) held.add(r);
    });
  }
  return held;
}

/** SQLite: one prepared statement per row, no JSON document to build and parse (~15 µs a row that way). */
async function writeDeliveries(
  q: Queryable,
  rows: readonly NewDelivery[],
  status: (r: NewDelivery) => 'held' | 'pending',
  now: number,
): Promise<void> {
  for (const r of rows) {
    await q.run(INSERT_DELIVERY_ROW, [
      r.id,
      r.message_id,
      r.endpoint_id,
      r.tenant_id,
      r.event_type,
      r.next_attempt_at,
      r.replay_of,
      r.first_headers,
      status(r),
      r.ordering_key ?? null,
      r.ordering_seq ?? null,
      now,
    ]);
  }
}

/**
 * The heads of lines ended (succeeded, dead): the next held delivery of each line becomes pending. It
 * keeps the due time it was fanned out with (never later than now), so the claims' oldest-due-first
 * order takes it ahead of the endpoint's work that arrived after it: released "due now", it waited
 * behind the whole backlog (docs/architecture.md, "Ordering keys"). Run after the queue rows are
 * locked and the heads' new status written, in the same transaction.
 */
export async function advanceLines(
  q: Queryable,
  ended: readonly { endpoint_id: string; ordering_key: string | null }[],
  now: number,
): Promise<void> {
  const lines = new Map<string, Line>();
  for (const e of ended) {
    if (e.ordering_key !== null)
      lines.set(lineId(e), { endpoint_id: e.endpoint_id, ordering_key: e.ordering_key });
  }
  if (lines.size === 0) return;
  const t = jsonRecords(q.dialect, 2, LINE_COLUMNS);
  // A line whose head ended has no other pending or delivering row: its first open row is the next.
  const promote = `UPDATE deliveries SET status = 'pending',
       next_attempt_at = ${least(q.dialect, 'next_attempt_at', 'CAST($1 AS BIGINT)')}, updated_at = $1
     WHERE id IN (
       SELECT (SELECT d.id FROM deliveries d
               WHERE d.endpoint_id = t.item_endpoint AND d.ordering_key = t.item_key AND d.${OPEN_IN_LINE}
               ORDER BY d.ordering_seq LIMIT 1)
       FROM ${t})
       AND status = 'held'
     RETURNING endpoint_id, next_attempt_at`;
  const params = [
    now,
    JSON.stringify(
      [...lines.values()].map((l) => ({ item_endpoint: l.endpoint_id, item_key: l.ordering_key })),
    ),
  ];
  // Already counted in `queued` while held: only the due time moves, to the earliest released. On
  // PostgreSQL in the same statement: the caller holds the queue rows' locks, and each round trip
  // more is as much longer that fan-outs, claims and flushes of these endpoints wait for them.
  if (q.dialect === 'postgres') {
    await q.run(`WITH promoted AS (${promote}) ${bringDueForward('promoted')}`, params);
    return;
  }
  const promoted = await q.all<{ endpoint_id: string; next_attempt_at: number | string }>(promote, params);
  await enqueue(
    q,
    arrivalsOf(
      promoted.map((r) => ({ endpoint_id: r.endpoint_id, next_attempt_at: Number(r.next_attempt_at) })),
    ).map((a) => ({ ...a, count: 0 })),
  );
}

/**
 * Claims due deliveries: ready endpoints in the order they became ready, from each as many as its
 * limit leaves room for while the claim's own limit lasts, the attempt counted and the lease taken
 * together. The cost is O(batch):
 * only ready endpoints' rows and the first due deliveries of each are read.
 */
export function claimDeliveries(db: Db, o: ClaimOptions): Promise<ClaimedAttempt[]> {
  return db.dialect === 'postgres' ? claimPostgres(db, o) : claimSqlite(db, o);
}

/** claimDeliveries inside the caller's transaction (a flush's that claims), which it then commits. */
export async function claimInTransaction(tx: Queryable, o: ClaimOptions): Promise<ClaimedAttempt[]> {
  return tx.dialect === 'postgres' ? claimPostgres(tx, o) : (await claimWithin(tx, o)).attempts;
}

const REF_COLUMNS = { item_id: 'text', item_attempt: 'int' } as const;
// The column sets are built once: a spread adding properties, run per flush, made a new hidden class
// each time (V8's --log-maps showed it), and every read of such an object megamorphic.
const SUCCESS_COLUMNS = { ...REF_COLUMNS, item_status: 'int' } as const;
const FAILURE_COLUMNS = {
  ...REF_COLUMNS,
  item_status: 'int',
  item_error: 'text',
  item_response: 'text',
  item_retry: 'bigint',
  item_headers: 'text',
} as const;
/**
 * The fence of a transition of the batch in parameter $1 (joined as `t`). On PostgreSQL the ids are
 * also given as an array, so the rows are found by primary key whatever the plan kept for the
 * statement: joined to a function's rows alone, a plan made while the table was small reads all of
 * it (store/db.ts, notIndexed).
 */
function fence(dialect: Dialect): string {
  const byKey =
    dialect === 'postgres'
      ? `deliveries.id = ANY(ARRAY(SELECT item_id FROM ${jsonRecords(dialect, 1, { item_id: 'text' }, 'k')})) AND `
      : '';
  return `${byKey}deliveries.id = t.item_id AND ${notIndexed("deliveries.status = 'delivering'")}
    AND deliveries.attempts = t.item_attempt`;
}

/** Records successes; answers the rows the fence let through. */
export async function completeDeliveries(
  q: Queryable,
  items: readonly (AttemptRef & { status: number })[],
  now: number,
): Promise<FencedRow[]> {
  if (items.length === 0) return [];
  const t = jsonRecords(q.dialect, 1, SUCCESS_COLUMNS);
  return q.all<FencedRow>(
    `UPDATE deliveries SET status = 'succeeded', last_status = t.item_status, last_error = NULL,
       last_response = NULL, lease_expires_at = NULL, completed_at = $2, updated_at = $2
     FROM ${t} WHERE ${fence(q.dialect)}
     RETURNING id, endpoint_id, ordering_key`,
    [
      JSON.stringify(items.map((i) => ({ item_id: i.id, item_attempt: i.attempt, item_status: i.status }))),
      now,
    ],
  );
}

/**
 * Records a flush made only of successes at healthy endpoints, with its statistics and queue
 * settlement: one statement on PostgreSQL, one short transaction on SQLite. Answers the rows the fence
 * let through.
 */
export async function recordSuccesses(
  db: Db,
  items: readonly SuccessRecord[],
  now: number,
  ceiling: number,
): Promise<FencedRow[]> {
  if (items.length === 0) return [];
  if (db.dialect === 'postgres' && !items.some((i) => i.ordering_key !== null))
    return recordSuccessesPostgres(db, items, now, bucketOf(now), ceiling);
  return db.transaction((tx) => recordSuccessesWithin(tx, items, now, ceiling));
}

/** Whether a flush of these successes claims in its own transaction (Capabilities.claimWithOutcomes). */
export function claimsWithSuccesses(db: Db, items: readonly { ordering_key: string | null }[]): boolean {
  if (items.length === 0) return false;
  return db.capabilities.claimWithOutcomes === 'every' || items.some((i) => i.ordering_key !== null);
}

/**
 * recordSuccesses, then a claim (`next`, if any) of what the slots it frees allow, in the same
 * transaction where the store claims with outcomes (Capabilities.claimWithOutcomes; docs/architecture.md, "Recording outcomes").
 * `claimed` is null where no claim was made.
 */
export async function recordSuccessesThenClaim(
  db: Db,
  items: readonly SuccessRecord[],
  now: number,
  ceiling: number,
  next: ClaimOptions | null,
): Promise<{ rows: FencedRow[]; claimed: ClaimedAttempt[] | null }> {
  if (!claimsWithSuccesses(db, items) || next === null || next.limit <= 0)
    return { rows: await recordSuccesses(db, items, now, ceiling), claimed: null };
  return db.transaction(async (tx) => {
    const rows = await recordSuccessesWithin(tx, items, now, ceiling);
    return { rows, claimed: await claimInTransaction(tx, next) };
  });
}

const bucketOf = (now: number) => Math.floor(now / BUCKET_MS) * BUCKET_MS;

async function recordSuccessesWithin(
  tx: Queryable,
  items: readonly SuccessRecord[],
  now: number,
  ceiling: number,
): Promise<FencedRow[]> {
  if (tx.dialect === 'postgres') {
    // The one statement cannot advance lines: it reads them in a snapshot taken before its queue locks
    // were granted, and could miss a delivery a fan-out added meanwhile. The next statement's snapshot
    // is taken under those locks.
    const rows = await recordSuccessesPostgres(tx, items, now, bucketOf(now), ceiling);
    await advanceLines(tx, rows, now);
    return rows;
  }
  const rows = await completeDeliveries(tx, items, now);
  await advanceLines(tx, rows, now);
  const bucket = bucketOf(now);
  const byId = new Map(items.map((i) => [i.id, i]));
  const stats = new Map<string, StatsIncrement>();
  const settlements = new Map<string, QueueSettlement>();
  for (const row of rows) {
    const item = byId.get(row.id)!;
    const s = stats.get(row.endpoint_id) ?? emptyStats(bucket, row.endpoint_id, item.tenant_id);
    s.succeeded += 1;
    stats.set(row.endpoint_id, s);
    const q = settlements.get(row.endpoint_id) ?? emptySettlement(row.endpoint_id);
    q.finished += 1;
    if (item.fast) q.fast += 1;
    addAnswer(q, item.answerMs, true);
    settlements.set(row.endpoint_id, q);
  }
  await addStats(tx, stats.values());
  await settleQueues(tx, [...settlements.values()], ceiling, now);
  return rows;
}

export interface FailedAttempt extends AttemptRef {
  status: number | null;
  /** The reason, in clear; the subscriber's answer goes sealed in `response`. */
  error: string;
  response: Buffer | null;
  /** When to try again; null: no attempts left, the delivery is dead. */
  retryAt: number | null;
  /** Headers of attempt 1, kept for the dead-letter record ("as first sent"). */
  firstHeaders: string | null;
}

/** Records failures, each a retry or a death, in one statement; answers the rows the fence let through. */
export async function failDeliveries(
  q: Queryable,
  items: readonly FailedAttempt[],
  now: number,
): Promise<(FencedRow & { status: 'pending' | 'dead'; next_attempt_at: number })[]> {
  if (items.length === 0) return [];
  const t = jsonRecords(q.dialect, 1, FAILURE_COLUMNS);
  const rows = await q.all<FencedRow & { status: 'pending' | 'dead'; next_attempt_at: number }>(
    `UPDATE deliveries SET
       status = CASE WHEN t.item_retry IS NULL THEN 'dead' ELSE 'pending' END,
       next_attempt_at = COALESCE(t.item_retry, deliveries.next_attempt_at),
       completed_at = CASE WHEN t.item_retry IS NULL THEN CAST($2 AS BIGINT) ELSE NULL END,
       last_status = t.item_status, last_error = t.item_error,
       last_response = ${blobFromHex(q.dialect, 't.item_response')},
       first_headers = COALESCE(deliveries.first_headers, t.item_headers),
       lease_expires_at = NULL, updated_at = CAST($2 AS BIGINT)
     FROM ${t} WHERE ${fence(q.dialect)}
     RETURNING id, endpoint_id, ordering_key, status, next_attempt_at`,
    [
      JSON.stringify(
        items.map((i) => ({
          item_id: i.id,
          item_attempt: i.attempt,
          item_status: i.status,
          item_error: i.error,
          item_response: i.response?.toString('hex') ?? null,
          item_retry: i.retryAt,
          item_headers: i.firstHeaders,
        })),
      ),
      now,
    ],
  );
  return rows.map((r) => ({ ...r, next_attempt_at: Number(r.next_attempt_at) }));
}

/** Puts fenced rows that went back to pending into their queues: in flight down, queued up. */
async function requeue(
  q: Queryable,
  rows: readonly FencedRow[],
  due: number,
  ceiling: number,
): Promise<void> {
  const settlements = arrivalsOf(rows.map((r) => ({ endpoint_id: r.endpoint_id, next_attempt_at: due }))).map(
    (a) => ({ ...emptySettlement(a.endpoint_id), finished: a.count, requeued: a.count, requeuedDue: a.due }),
  );
  await settleQueues(q, settlements, ceiling, due);
}

/**
 * Returns a worker's unfinished claims at shutdown so another worker can take them at once. The claim
 * still counts as an attempt: attempt numbers only grow, which keeps them usable as fencing tokens.
 */
export async function releaseDeliveries(
  q: Queryable,
  items: readonly (AttemptRef & { endpoint_id: string })[],
  now: number,
  ceiling: number,
): Promise<number> {
  if (items.length === 0) return 0;
  await lockQueues(
    q,
    items.map((i) => i.endpoint_id),
  );
  const t = jsonRecords(q.dialect, 1, REF_COLUMNS);
  const rows = await q.all<FencedRow>(
    `UPDATE deliveries SET status = 'pending', lease_expires_at = NULL, next_attempt_at = $2, updated_at = $2,
       last_error = 'attempt interrupted by worker shutdown', last_response = NULL
     FROM ${t} WHERE ${fence(q.dialect)}
     RETURNING id, endpoint_id, ordering_key`,
    [JSON.stringify(items.map((i) => ({ item_id: i.id, item_attempt: i.attempt }))), now],
  );
  await requeue(q, rows, now, ceiling);
  return rows.length;
}

/**
 * A worker that died mid-attempt leaves its lease behind; the delivery becomes due again. Rows another
 * transaction holds are skipped, not waited for: one stalled process must not stall the reaper. Run it
 * in a transaction (the queue rows are locked first).
 */
export async function reapExpiredLeases(
  q: Queryable,
  now: number,
  ceiling: number,
  limit = 1000,
): Promise<number> {
  const expired = await q.all<FencedRow & { attempts: number }>(
    `SELECT id, endpoint_id, attempts FROM deliveries WHERE status = 'delivering' AND lease_expires_at < $1
     ORDER BY lease_expires_at ${limitParam(2)}`,
    [now, limit],
  );
  if (expired.length === 0) return 0;
  await lockQueues(
    q,
    expired.map((r) => r.endpoint_id),
  );
  const t = jsonRecords(q.dialect, 2, REF_COLUMNS);
  const rows = await q.all<FencedRow>(
    `UPDATE deliveries SET status = 'pending', next_attempt_at = $1, lease_expires_at = NULL, updated_at = $1,
       last_error = COALESCE(last_error, 'worker lease expired during the attempt')
     WHERE id IN (
       SELECT d.id FROM deliveries d JOIN ${t} ON d.id = t.item_id AND d.attempts = t.item_attempt
       WHERE d.status = 'delivering' AND d.lease_expires_at < $1 ${forUpdate(q.dialect, true, 'd')})
     RETURNING id, endpoint_id, ordering_key`,
    [now, JSON.stringify(expired.map((r) => ({ item_id: r.id, item_attempt: Number(r.attempts) })))],
  );
  await requeue(q, rows, now, ceiling);
  return rows.length;
}

/**
 * Brings each queue's in-flight count back to the deliveries actually leased. The transitions keep it
 * exact; this is the safety net that a bug or a manual edit cannot leave an endpoint stuck at its limit.
 * Reads only the in-flight rows (the partial lease index).
 */
export async function reconcileInFlight(q: Queryable): Promise<number> {
  // One snapshot sees every transition whole (each moves a queue's count and its leases together), so
  // a count that differs here is wrong, not caught halfway. Only those queues are locked and recounted:
  // most rounds lock nothing, where locking every busy queue row held each claim and flush off it
  // for the whole count (~600 ms with 1,000 endpoints and 8,000 attempts out, every 5 s per worker).
  const wrong = await q.all<{ endpoint_id: string }>(
    `SELECT q.endpoint_id FROM endpoint_queues q
     LEFT JOIN (SELECT endpoint_id, COUNT(*) AS n FROM deliveries WHERE status = 'delivering' GROUP BY endpoint_id) c
       ON c.endpoint_id = q.endpoint_id
     WHERE (q.in_flight > 0 OR c.n IS NOT NULL) AND q.in_flight <> COALESCE(c.n, 0)`,
  );
  if (wrong.length === 0) return 0;
  // Locked before the recount's snapshot is taken, so it counts what the locks hold; those another
  // transaction holds now wait for the next round.
  const locked = await q.all<{ endpoint_id: string }>(
    `SELECT endpoint_id FROM endpoint_queues WHERE endpoint_id IN (${placeholders(wrong.length)})
     ORDER BY endpoint_id ${forUpdate(q.dialect, true)}`,
    wrong.map((r) => r.endpoint_id),
  );
  if (locked.length === 0) return 0;
  const ids = locked.map((r) => r.endpoint_id);
  return q.run(
    `UPDATE endpoint_queues SET in_flight = (
       SELECT COUNT(*) FROM deliveries d WHERE d.status = 'delivering' AND d.endpoint_id = endpoint_queues.endpoint_id)
     WHERE endpoint_id IN (${placeholders(ids.length)})
       AND in_flight <> (SELECT COUNT(*) FROM deliveries d
         WHERE d.status = 'delivering' AND d.endpoint_id = endpoint_queues.endpoint_id)`,
    ids,
  );
}

/** The earliest due time of a queue's pending deliveries, one probe of deliveries_pending_by_endpoint. */
const EARLIEST_PENDING = `(SELECT MIN(d.next_attempt_at) FROM deliveries d
  WHERE d.endpoint_id = endpoint_queues.endpoint_id AND d.status = 'pending')`;
/** Where a queue's next due time is missing or later than its earliest pending delivery. */
const NEXT_DUE_TOO_LATE = `${EARLIEST_PENDING} < COALESCE(next_due_at, 9223372036854775807)`;

/**
 * Brings each active queue's next due time back to its earliest pending delivery where it is later or
 * missing. The transitions keep it a lower bound; this is the safety net that a bug cannot leave a
 * due delivery where no claim looks (a claim once cleared it while a line advanced on PostgreSQL:
 * test/store/claim-races.test.ts). One probe of the due index per queue with something queued.
 */
export async function reconcileNextDue(q: Queryable): Promise<number> {
  const locked = await q.all<{ endpoint_id: string }>(
    `SELECT endpoint_id FROM endpoint_queues WHERE active = 1 AND queued > 0 AND ${NEXT_DUE_TOO_LATE}
     ORDER BY endpoint_id ${forUpdate(q.dialect, true)}`,
  );
  if (locked.length === 0) return 0;
  // Read again under the locks: a claim may have moved it since.
  return q.run(
    `UPDATE endpoint_queues SET next_due_at = ${EARLIEST_PENDING}
     WHERE endpoint_id IN (${placeholders(locked.length)}) AND ${NEXT_DUE_TOO_LATE}`,
    locked.map((r) => r.endpoint_id),
  );
}

/** Cancels what waits for a deleted endpoint, attempts in flight included; its queue is emptied. */
export async function cancelForEndpoint(q: Queryable, endpointId: string, now: number): Promise<number> {
  await lockQueues(q, [endpointId]);
  const cancelled = await q.all<{ replay_of: string | null }>(
    `UPDATE deliveries SET status = 'cancelled', lease_expires_at = NULL, completed_at = $2, updated_at = $2
     WHERE endpoint_id = $1 AND status IN ('held', 'pending', 'delivering')
     RETURNING replay_of`,
    [endpointId, now],
  );
  await clearQueue(q, endpointId);
  // A cancelled replay leaves its dead letter awaiting an operator again.
  await reopenDeadLetters(
    q,
    cancelled.flatMap((r) => (r.replay_of ? [r.replay_of] : [])),
  );
  return cancelled.length;
}

/**
 * Tidies what a fan-out can leave behind when it read an endpoint as active just before another
 * transaction deleted it (PostgreSQL): pending deliveries of a deleted endpoint are cancelled.
 */
export async function sweepDeletedEndpoints(q: Queryable, now: number): Promise<number> {
  const strays = await q.all<{ endpoint_id: string }>(
    `SELECT q.endpoint_id FROM endpoint_queues q JOIN endpoints e ON e.id = q.endpoint_id
     WHERE q.queued > 0 AND q.active = 0 AND e.status = 'deleted' ORDER BY q.endpoint_id`,
  );
  let cancelled = 0;
  for (const { endpoint_id } of strays) cancelled += await cancelForEndpoint(q, endpoint_id, now);
  return cancelled;
}

export async function getDelivery(q: Queryable, id: string): Promise<DeliveryRow | undefined> {
  return q.one<DeliveryRow>('SELECT * FROM deliveries WHERE id = $1', [id]);
}
