// Every state transition of a delivery, each one statement. The attempt number doubles as a fencing
// token: an outcome is written only `WHERE status = 'delivering' AND attempts = <the attempt it ran>`,
// so a worker whose lease expired cannot overwrite a newer attempt of the same delivery.
import { jsonTextArray, placeholders, type Queryable, type SqlValue } from './db.js';

/** `parked`: waiting for its endpoint's circuit to close or for the endpoint to be re-enabled. */
export const DELIVERY_STATUSES = [
  'pending',
  'parked',
  'delivering',
  'succeeded',
  'dead',
  'cancelled',
] as const;
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
  last_error: string | null;
  /** JSON of the headers of attempt 1, kept for the dead-letter record ("as first sent"). */
  first_headers: string | null;
  replay_of: string | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
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
> & {
  /** `parked` when the endpoint's circuit is open; `pending` otherwise. */
  status?: 'pending' | 'parked';
};

const INSERT_COLUMNS = 11;

export async function insertDeliveries(
  q: Queryable,
  rows: readonly NewDelivery[],
  now: number,
): Promise<void> {
  // Chunked so one statement stays well inside both engines' parameter limits.
  for (let start = 0; start < rows.length; start += 500) {
    const chunk = rows.slice(start, start + 500);
    const params: SqlValue[] = [];
    const tuples = chunk.map((r, i) => {
      params.push(r.id, r.message_id, r.endpoint_id, r.tenant_id, r.event_type, r.status ?? 'pending');
      params.push(r.next_attempt_at);
      params.push(r.replay_of, r.first_headers, now, now);
      const base = i * INSERT_COLUMNS;
      return `(${placeholders(INSERT_COLUMNS, base + 1)})`;
    });
    await q.run(
      `INSERT INTO deliveries (id, message_id, endpoint_id, tenant_id, event_type, status, next_attempt_at,
         replay_of, first_headers, created_at, updated_at)
       VALUES ${tuples.join(', ')}`,
      params,
    );
  }
}

export type ClaimedDelivery = Pick<
  DeliveryRow,
  | 'id'
  | 'message_id'
  | 'endpoint_id'
  | 'tenant_id'
  | 'event_type'
  | 'attempts'
  | 'first_headers'
  | 'replay_of'
>;

export interface ClaimOptions {
  now: number;
  leaseUntil: number;
  limit: number;
  /** At most this many deliveries of one endpoint per claim. */
  perEndpoint: number;
  /** Endpoints whose in-flight attempts are already at the cap on this worker. */
  excludeEndpoints: readonly string[];
  /**
   * Attempts this worker already has in flight per endpoint: they count against `perEndpoint`, so an
   * endpoint with one attempt still running gets at most `perEndpoint - 1` more, never `perEndpoint`.
   */
  inFlight?: Readonly<Record<string, number>>;
}

/**
 * Claims due deliveries of active endpoints in one statement: the attempt counter and the lease are
 * taken together. A window caps each endpoint's share of the batch, so a backlog at one endpoint does
 * not fill the whole batch.
 */
export async function claimDue(q: Queryable, o: ClaimOptions): Promise<ClaimedDelivery[]> {
  const postgres = q.dialect === 'postgres';
  const excluded = jsonTextArray(q.dialect, 5);
  const busy = postgres
    ? 'COALESCE(($7::jsonb ->> endpoint_id)::int, 0)'
    : `COALESCE(json_extract($7, '$."' || endpoint_id || '"'), 0)`;
  const candidates = Math.max(o.limit * 8, 256);
  // On PostgreSQL only the rows finally taken are locked (SKIP LOCKED): locking the whole candidate
  // window would write a row lock into hundreds of tuples per claim to take a handful. Two workers
  // may pick the same rows; the lock and the status re-check hand each to one of them.
  const take = postgres
    ? `locked AS (
         SELECT d.id FROM deliveries d WHERE d.id IN (SELECT id FROM picked) AND d.status = 'pending'
         FOR UPDATE SKIP LOCKED
       )`
    : 'locked AS (SELECT id FROM picked)';
  return q.all<ClaimedDelivery>(
    // The candidates are read straight off the due index and stop at the LIMIT, so a claim costs the
    // same with ten or a million deliveries due. The active-endpoint check comes after it: disabled
    // endpoints' deliveries are parked, not pending, so they do not crowd the window.
    `WITH candidates AS (
       SELECT d.id, d.endpoint_id, d.next_attempt_at FROM deliveries d
       WHERE d.status = 'pending' AND d.next_attempt_at <= $1
         AND d.endpoint_id NOT IN (${excluded})
       ORDER BY d.next_attempt_at
       LIMIT $6
     ), ranked AS (
       SELECT c.id, c.endpoint_id, c.next_attempt_at,
         ROW_NUMBER() OVER (PARTITION BY c.endpoint_id ORDER BY c.next_attempt_at, c.id) AS endpoint_rank
       FROM candidates c JOIN endpoints e ON e.id = c.endpoint_id AND e.status = 'active'
     ), picked AS (
       SELECT id FROM ranked WHERE endpoint_rank <= $4 - ${busy} ORDER BY next_attempt_at LIMIT $3
     ), ${take}
     UPDATE deliveries SET status = 'delivering', attempts = attempts + 1, lease_expires_at = $2, updated_at = $1
     WHERE id IN (SELECT id FROM locked) AND status = 'pending'
     RETURNING id, message_id, endpoint_id, tenant_id, event_type, attempts, first_headers, replay_of`,
    [
      o.now,
      o.leaseUntil,
      o.limit,
      o.perEndpoint,
      JSON.stringify(o.excludeEndpoints),
      candidates,
      JSON.stringify(o.inFlight ?? {}),
    ],
  );
}

export async function markSucceeded(
  q: Queryable,
  items: readonly { id: string; attempt: number; status: number }[],
  now: number,
): Promise<number> {
  let changed = 0;
  for (const item of items) {
    changed += await q.run(
      `UPDATE deliveries SET status = 'succeeded', last_status = $3, last_error = NULL, lease_expires_at = NULL,
         completed_at = $4, updated_at = $4
       WHERE id = $1 AND status = 'delivering' AND attempts = $2`,
      [item.id, item.attempt, item.status, now],
    );
  }
  return changed;
}

export interface FailedAttempt {
  id: string;
  attempt: number;
  status: number | null;
  error: string;
  nextAttemptAt: number;
  firstHeaders: string | null;
}

export async function markForRetry(q: Queryable, f: FailedAttempt, now: number): Promise<boolean> {
  const changed = await q.run(
    `UPDATE deliveries SET status = 'pending', next_attempt_at = $3, last_status = $4, last_error = $5,
       first_headers = COALESCE(first_headers, $6), lease_expires_at = NULL, updated_at = $7
     WHERE id = $1 AND status = 'delivering' AND attempts = $2`,
    [f.id, f.attempt, f.nextAttemptAt, f.status, f.error, f.firstHeaders, now],
  );
  return changed === 1;
}

export async function markDead(
  q: Queryable,
  f: Omit<FailedAttempt, 'nextAttemptAt' | 'firstHeaders'>,
  now: number,
): Promise<boolean> {
  const changed = await q.run(
    `UPDATE deliveries SET status = 'dead', last_status = $3, last_error = $4, lease_expires_at = NULL,
       completed_at = $5, updated_at = $5
     WHERE id = $1 AND status = 'delivering' AND attempts = $2`,
    [f.id, f.attempt, f.status, f.error, now],
  );
  return changed === 1;
}

/** A worker that died mid-attempt leaves its lease behind; the delivery becomes due again. */
export async function releaseExpiredLeases(q: Queryable, now: number): Promise<number> {
  return q.run(
    `UPDATE deliveries SET status = 'pending', next_attempt_at = $1, lease_expires_at = NULL, updated_at = $1,
       last_error = COALESCE(last_error, 'worker lease expired during the attempt')
     WHERE status = 'delivering' AND lease_expires_at < $1`,
    [now],
  );
}

/**
 * Returns a worker's unfinished claims at shutdown so another worker can take them at once. The claim
 * still counts as an attempt: attempt numbers only grow, which keeps them usable as fencing tokens.
 */
export async function releaseClaims(
  q: Queryable,
  items: readonly { id: string; attempt: number }[],
  now: number,
): Promise<void> {
  for (const item of items) {
    await q.run(
      `UPDATE deliveries SET status = 'pending', lease_expires_at = NULL, next_attempt_at = $3, updated_at = $3,
         last_error = 'attempt interrupted by worker shutdown'
       WHERE id = $1 AND status = 'delivering' AND attempts = $2`,
      [item.id, item.attempt, now],
    );
  }
}

export async function cancelPendingForEndpoint(
  q: Queryable,
  endpointId: string,
  now: number,
): Promise<number> {
  return q.run(
    `UPDATE deliveries SET status = 'cancelled', lease_expires_at = NULL, completed_at = $2, updated_at = $2
     WHERE endpoint_id = $1 AND status IN ('pending', 'parked', 'delivering')`,
    [endpointId, now],
  );
}

/** Takes an endpoint's waiting deliveries out of the due index while its circuit is open. */
export async function parkPending(q: Queryable, endpointId: string, now: number): Promise<number> {
  return q.run(
    `UPDATE deliveries SET status = 'parked', updated_at = $2 WHERE endpoint_id = $1 AND status = 'pending'`,
    [endpointId, now],
  );
}

/**
 * Tidies what a fan-out can leave behind when it read an endpoint as active just before another
 * transaction disabled or deleted it (PostgreSQL): pending deliveries of a disabled endpoint are
 * parked, those of a deleted one cancelled. Claims rely on it: no pending delivery of an inactive
 * endpoint stays in the due index for long.
 */
export async function sweepStrays(q: Queryable, now: number): Promise<number> {
  const parked = await q.run(
    `UPDATE deliveries SET status = 'parked', updated_at = $1
     WHERE status = 'pending' AND endpoint_id IN (SELECT id FROM endpoints WHERE status = 'disabled')`,
    [now],
  );
  const cancelled = await q.run(
    `UPDATE deliveries SET status = 'cancelled', completed_at = $1, updated_at = $1
     WHERE status IN ('pending', 'parked') AND endpoint_id IN (SELECT id FROM endpoints WHERE status = 'deleted')`,
    [now],
  );
  return parked + cancelled;
}

/**
 * Returns parked deliveries to the queue, due now: all of them when the endpoint is healthy again, or
 * the oldest `limit` as the probe of a half-open circuit.
 */
export async function unpark(q: Queryable, endpointId: string, now: number, limit?: number): Promise<number> {
  return q.run(
    `UPDATE deliveries SET status = 'pending', next_attempt_at = $2, updated_at = $2
     WHERE id IN (
       SELECT id FROM deliveries WHERE endpoint_id = $1 AND status = 'parked'
       ORDER BY next_attempt_at ${limit === undefined ? '' : 'LIMIT $3'})`,
    limit === undefined ? [endpointId, now] : [endpointId, now, limit],
  );
}

export async function getDelivery(q: Queryable, id: string): Promise<DeliveryRow | undefined> {
  return q.one<DeliveryRow>('SELECT * FROM deliveries WHERE id = $1', [id]);
}

/**
 * When the next delivery a claim could take falls due. It applies claimDue's filters: counting a due
 * delivery of a disabled endpoint, or of one at its in-flight cap, would make an idle worker wake at
 * once, claim nothing, and spin on the database until that work became claimable.
 */
export async function nextDueAt(
  q: Queryable,
  excludeEndpoints: readonly string[] = [],
): Promise<number | null> {
  const excluded = jsonTextArray(q.dialect, 1);
  const row = await q.one<{ at: number | null }>(
    `SELECT MIN(d.next_attempt_at) AS at FROM deliveries d
     WHERE d.status = 'pending' AND d.endpoint_id NOT IN (${excluded})
       AND EXISTS (SELECT 1 FROM endpoints e WHERE e.id = d.endpoint_id AND e.status = 'active')`,
    [JSON.stringify(excludeEndpoints)],
  );
  return row?.at == null ? null : Number(row.at);
}

export interface QueueDepth {
  due: number;
  /** Waiting for a retry's backoff or for the endpoint's circuit to close. */
  scheduled: number;
  delivering: number;
}

export async function queueDepth(q: Queryable, now: number): Promise<QueueDepth> {
  const row = await q.one<QueueDepth>(
    `SELECT
       COALESCE(SUM(CASE WHEN status = 'pending' AND next_attempt_at <= $1 THEN 1 ELSE 0 END), 0) AS due,
       COALESCE(SUM(CASE WHEN status = 'parked' OR (status = 'pending' AND next_attempt_at > $1) THEN 1 ELSE 0 END), 0)
         AS scheduled,
       COALESCE(SUM(CASE WHEN status = 'delivering' THEN 1 ELSE 0 END), 0) AS delivering
     FROM deliveries WHERE status IN ('pending', 'parked', 'delivering')`,
    [now],
  );
  return {
    due: Number(row?.due ?? 0),
    scheduled: Number(row?.scheduled ?? 0),
    delivering: Number(row?.delivering ?? 0),
  };
}

/** Deliveries not yet finished, per endpoint of a tenant: each endpoint's backlog. */
export async function backlogByEndpoint(
  q: Queryable,
  tenantId: string,
): Promise<{ endpoint_id: string; n: number }[]> {
  return q.all(
    `SELECT endpoint_id, COUNT(*) AS n FROM deliveries
     WHERE tenant_id = $1 AND status IN ('pending', 'parked', 'delivering') GROUP BY endpoint_id`,
    [tenantId],
  );
}
