// The claim on SQLite: a few statements in one short write transaction (docs/architecture.md,
// "Claiming"). Statements cost microseconds here, with no round trip, so the per-endpoint reads are a
// prepared statement in a loop rather than one large query; the writes are set-based like PostgreSQL's.
import { jsonRecords, least, limitParam, type Db, type Queryable } from '../db.js';
import { paceLateCreditUs, pacedSendDelayUs } from '../endpoint-queues.js';
import type { ClaimOptions, ClaimedAttempt } from '../attempts.js';

/** A ready endpoint queue, with what its attempts need of the endpoint (read once, not per attempt). */
type Ready = Pick<
  ClaimedAttempt,
  | 'endpoint_id'
  | 'url'
  | 'secret'
  | 'previous_secret'
  | 'previous_secret_expires_at'
  | 'endpoint_headers'
  | 'endpoint_healthy'
> & {
  room: number;
  rate_interval_us: number | null;
  rate_tolerance_us: number | null;
  rate_tat_us: number | null;
};

/** One of an endpoint's first pending deliveries, with its message's payload. */
type Pending = Pick<
  ClaimedAttempt,
  | 'id'
  | 'message_id'
  | 'tenant_id'
  | 'event_type'
  | 'attempts'
  | 'first_headers'
  | 'replay_of'
  | 'ordering_key'
  | 'payload'
  | 'is_test'
  | 'trace_context'
> & { next_attempt_at: number };

/**
 * How many attempts a rate limit allows now, and the pace's start (docs/architecture.md, "Rate
 * limits"): as many as fit before the pace runs more than its tolerance ahead of now.
 */
function rateRoom(r: Ready, nowUs: number): { room: number; from: number } {
  if (r.rate_interval_us === null) return { room: Infinity, from: nowUs };
  const from = Math.max(r.rate_tat_us ?? 0, nowUs - paceLateCreditUs(r.rate_interval_us));
  const ahead = nowUs + r.rate_tolerance_us! - from;
  return { room: ahead < 0 ? 0 : Math.floor(ahead / r.rate_interval_us) + 1, from };
}

/**
 * Endpoints one transaction takes from. Each costs statements inside the write transaction, and
 * meanwhile `hookline serve`'s API waits for the writer: a claim across 160 ready endpoints held it
 * ~4 ms. A claim that needs more goes on in another transaction, and whoever waits goes in between.
 */
export const ENDPOINTS_PER_CLAIM = 32;

export async function claimSqlite(db: Db, o: ClaimOptions): Promise<ClaimedAttempt[]> {
  // Most claims that find nothing come while every ready endpoint is at its limit. A read needs no
  // write lock and no commit (WAL readers never wait), so those cost a few microseconds instead of a
  // write transaction; a claim that sees work reads again inside its transaction.
  if (!(await db.one(`SELECT 1 AS ready FROM endpoint_queues WHERE ready_at <= $1 LIMIT 1`, [o.now])))
    return [];
  const claimed: ClaimedAttempt[] = [];
  for (;;) {
    const { attempts, endpoints } = await claimFromSome(db, { ...o, limit: o.limit - claimed.length });
    claimed.push(...attempts);
    // Fewer endpoints than that were ready, or these gave nothing (then they are settled and the next
    // claim goes on from there): done for now.
    if (endpoints < ENDPOINTS_PER_CLAIM || attempts.length === 0 || claimed.length >= o.limit) return claimed;
  }
}

/** One transaction of a claim: from the first ENDPOINTS_PER_CLAIM ready endpoints at most. */
function claimFromSome(db: Db, o: ClaimOptions): Promise<{ attempts: ClaimedAttempt[]; endpoints: number }> {
  return db.transaction((tx) => claimWithin(tx, o));
}

/** What a claim writes back to one endpoint's queue row. */
interface Settled {
  item_endpoint: string;
  item_claimed: number;
  item_due: number | null;
  item_tat: number | null;
  item_throttled: number | null;
}

/**
 * A claim's statements, inside a write transaction the caller holds: from the first
 * ENDPOINTS_PER_CLAIM ready endpoints at most. A flush of successes ends with one
 * (recordSuccessesThenClaim), so the slots it frees are taken again without a transaction of their own.
 */
export async function claimWithin(
  tx: Queryable,
  o: ClaimOptions,
): Promise<{ attempts: ClaimedAttempt[]; endpoints: number }> {
  const ready = await tx.all<Ready>(
    `SELECT q.endpoint_id, ${least('sqlite', 'q.concurrency_limit', '$2')} - q.in_flight AS room,
       q.rate_interval_us, q.rate_tolerance_us, q.rate_tat_us,
       e.url, e.secret, e.previous_secret, e.previous_secret_expires_at, e.headers AS endpoint_headers,
       (e.failing_since IS NULL AND e.circuit_open_until IS NULL) AS endpoint_healthy
     FROM endpoint_queues q JOIN endpoints e ON e.id = q.endpoint_id
     WHERE q.ready_at <= $1 ORDER BY q.ready_at ${limitParam(3)}`,
    [o.now, o.ceiling, Math.min(o.limit, ENDPOINTS_PER_CLAIM)],
  );
  if (ready.length === 0) return { attempts: [], endpoints: 0 };
  const attempts: ClaimedAttempt[] = [];
  const settled: Settled[] = [];
  for (const r of ready) settled.push(await claimFromEndpoint(tx, r, o, attempts));
  await markClaimed(tx, attempts, settled, o);
  return { attempts, endpoints: ready.length };
}

/** Claims what one ready endpoint has room for, into `attempts`; answers what its queue row becomes. */
async function claimFromEndpoint(
  tx: Queryable,
  r: Ready,
  o: ClaimOptions,
  attempts: ClaimedAttempt[],
): Promise<Settled> {
  const rate = rateRoom(r, o.now * 1000);
  const room = Math.max(0, Math.min(r.room, rate.room, o.limit - attempts.length));
  // One row past the room: what is left tells the queue its next due time. The rows come with
  // what their attempts need, so no second read of the claimed deliveries follows.
  const rows = await tx.all<Pending>(
    `SELECT d.id, d.next_attempt_at, d.message_id, d.tenant_id, d.event_type, d.attempts,
       d.first_headers, d.replay_of, d.ordering_key, m.payload, m.is_test, m.trace_context
     FROM deliveries d JOIN messages m ON m.id = d.message_id
     WHERE d.endpoint_id = $1 AND d.status = 'pending' ORDER BY d.next_attempt_at ${limitParam(2)}`,
    [r.endpoint_id, room + 1],
  );
  let claimed = 0;
  while (claimed < room && claimed < rows.length && rows[claimed]!.next_attempt_at <= o.now) {
    const d = rows[claimed]!;
    const slot = r.rate_interval_us === null ? null : rate.from + claimed * r.rate_interval_us;
    attempts.push({
      id: d.id,
      message_id: d.message_id,
      endpoint_id: r.endpoint_id,
      tenant_id: d.tenant_id,
      event_type: d.event_type,
      // The attempt this claim starts (markClaimed counts it).
      attempts: d.attempts + 1,
      first_headers: d.first_headers,
      replay_of: d.replay_of,
      ordering_key: d.ordering_key,
      payload: d.payload,
      is_test: d.is_test,
      trace_context: d.trace_context,
      url: r.url,
      secret: r.secret,
      previous_secret: r.previous_secret,
      previous_secret_expires_at: r.previous_secret_expires_at,
      endpoint_headers: r.endpoint_headers,
      endpoint_healthy: r.endpoint_healthy,
      send_at: slot === null ? null : Math.floor((slot + pacedSendDelayUs(r.rate_interval_us!)) / 1000),
    });
    claimed++;
  }
  const paced = r.rate_interval_us !== null && claimed > 0;
  const tat = paced ? rate.from + claimed * r.rate_interval_us! : null;
  return {
    item_endpoint: r.endpoint_id,
    item_claimed: claimed,
    // Checked, not read past the end: an out-of-bounds read deoptimises this function.
    item_due: claimed < rows.length ? rows[claimed]!.next_attempt_at : null,
    item_tat: tat,
    item_throttled: tat === null ? null : Math.ceil((tat - r.rate_tolerance_us!) / 1000),
  };
}

const SETTLED_COLUMNS = {
  item_endpoint: 'text',
  item_claimed: 'int',
  item_due: 'bigint',
  item_tat: 'bigint',
  item_throttled: 'bigint',
} as const;

/** Counts the attempts and takes their leases; moves each queue row's counters, due time and pace. */
async function markClaimed(
  tx: Queryable,
  attempts: readonly ClaimedAttempt[],
  settled: readonly Settled[],
  o: ClaimOptions,
): Promise<void> {
  if (attempts.length > 0) {
    await tx.run(
      `UPDATE deliveries SET status = 'delivering', attempts = attempts + 1, lease_expires_at = $2, updated_at = $3
       WHERE id IN (SELECT value FROM json_each($1)) AND status = 'pending'`,
      [JSON.stringify(attempts.map((a) => a.id)), o.leaseUntil, o.now],
    );
  }
  const t = jsonRecords('sqlite', 1, SETTLED_COLUMNS);
  await tx.run(
    `UPDATE endpoint_queues SET
       in_flight = in_flight + t.item_claimed,
       queued = MAX(0, queued - t.item_claimed),
       next_due_at = t.item_due,
       concurrency_limit = MIN(concurrency_limit, $2),
       rate_tat_us = COALESCE(t.item_tat, rate_tat_us),
       throttled_until = COALESCE(t.item_throttled, throttled_until)
     FROM ${t} WHERE endpoint_queues.endpoint_id = t.item_endpoint`,
    [JSON.stringify(settled), o.ceiling],
  );
}
