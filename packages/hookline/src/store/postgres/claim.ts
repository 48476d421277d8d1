// The claim on PostgreSQL: one statement, one round trip (docs/architecture.md, "Claiming"). Ready
// endpoint queues are locked with SKIP LOCKED, so concurrent workers share out endpoints instead of
// waiting on each other; each endpoint's first due deliveries are read off its partial index; the
// deliveries, the queues' counters and the answer (payloads, URLs, secrets) all come from the same
// statement.
import { notIndexed, type Queryable } from '../db.js';
import { PACED_SEND_DELAY_INTERVALS, PACED_SEND_DELAY_MAX_US } from '../endpoint-queues.js';
import type { ClaimOptions, ClaimedAttempt } from '../attempts.js';

// Where the pace resumes: its theoretical next slot, or a slot in the past when the claim comes late,
// by at most paceLateCreditUs (store/endpoint-queues.ts), written out here in SQL.
const PACE_FROM = `GREATEST(COALESCE(q.rate_tat_us, 0), $5 - LEAST(${PACED_SEND_DELAY_MAX_US / 2}, ${PACED_SEND_DELAY_INTERVALS / 2} * q.rate_interval_us))`;

const CLAIM = `
WITH ready AS (
  -- Locked rows are read at their latest version; the deliveries below are read in the statement's
  -- snapshot. If a transaction committed a change to the queue row in between (a retry, a fan-out, or
  -- a line advanced, which leaves \`queued\` as it was and may lower \`next_due_at\`), the deliveries
  -- read may miss rows it made due: \`changed\`, told by the row's version, keeps its next due time as a
  -- lower bound (docs/architecture.md, "Claiming").
  -- Room: the adaptive limit's, and a rate limit's (docs/architecture.md, "Rate limits"): as many
  -- attempts as fit before the pace runs more than its tolerance ahead of now ($5, in microseconds).
  SELECT q.endpoint_id, q.ready_at, q.queued, q.next_due_at AS latest_due, q.rate_interval_us,
    q.rate_tolerance_us, ${PACE_FROM} AS tat_from,
    LEAST(LEAST(q.concurrency_limit, $4) - q.in_flight, CASE
      WHEN q.rate_interval_us IS NULL THEN $3
      WHEN $5 + q.rate_tolerance_us < ${PACE_FROM} THEN 0
      ELSE ($5 + q.rate_tolerance_us - ${PACE_FROM}) / q.rate_interval_us + 1
    END) AS room,
    (SELECT s.xmin FROM endpoint_queues s WHERE s.endpoint_id = q.endpoint_id) IS DISTINCT FROM q.xmin
      AS changed
  FROM endpoint_queues q
  WHERE q.ready_at <= $1
  ORDER BY q.ready_at
  LIMIT $3
  FOR UPDATE OF q SKIP LOCKED
), shares AS (
  -- The claim's limit shared out in ready order, longest waiting first: to each endpoint as many as its
  -- room and its queue allow until the limit is spent (\`queued\` also counts held deliveries and later
  -- retries, so it bounds what is due from above). So a claim reads O(limit) deliveries however many
  -- endpoints are ready. Those the limit leaves nothing are only locked, not read or written; one with
  -- no room (a ceiling below its limit, or its rate's next slot not yet come) is settled all the same.
  SELECT s.*, s.share > 0 OR s.room <= 0 AS settles FROM (
    SELECT r.*, GREATEST(0, LEAST(r.want,
      $3 - (SUM(r.want) OVER (ORDER BY r.ready_at, r.endpoint_id ROWS UNBOUNDED PRECEDING) - r.want)))::int AS share
    FROM (SELECT ready.*, LEAST(GREATEST(room, 0), GREATEST(queued, 1)) AS want FROM ready) r
  ) s
), candidates AS (
  -- One row past the endpoint's share: what is left tells the queue its next due time.
  SELECT d.id, d.endpoint_id, d.next_attempt_at, s.share,
    ROW_NUMBER() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS rank
  FROM shares s CROSS JOIN LATERAL (
    SELECT id, endpoint_id, next_attempt_at FROM deliveries
    WHERE endpoint_id = s.endpoint_id AND status = 'pending'
    ORDER BY next_attempt_at
    LIMIT s.share + 1
  ) d
  WHERE s.settles
), taken AS (
  SELECT id FROM candidates WHERE rank <= share AND next_attempt_at <= $1
  ORDER BY next_attempt_at LIMIT $3
), claimed AS (
  -- = ANY(ARRAY(…)) and a status check no partial index matches: primary-key lookups whatever the
  -- planner estimates for the CTE or the pending set (store/db.ts, notIndexed).
  UPDATE deliveries d SET status = 'delivering', attempts = d.attempts + 1, lease_expires_at = $2, updated_at = $1
  WHERE d.id = ANY(ARRAY(SELECT id FROM taken)) AND ${notIndexed("d.status = 'pending'")}
  RETURNING d.id, d.message_id, d.endpoint_id, d.tenant_id, d.event_type, d.attempts, d.first_headers, d.replay_of,
    d.ordering_key, d.next_attempt_at
), tally AS (
  -- Per endpoint, in one pass: how many it gave and the earliest due of what was read and left. (A
  -- subquery per endpoint read every claimed and candidate row once for each endpoint.)
  SELECT endpoint_id, COUNT(*) FILTER (WHERE was_claimed) AS claimed,
    MIN(next_attempt_at) FILTER (WHERE NOT was_claimed) AS next_due
  FROM (
    SELECT endpoint_id, true AS was_claimed, NULL::bigint AS next_attempt_at FROM claimed
    UNION ALL
    SELECT endpoint_id, false, next_attempt_at FROM candidates WHERE id NOT IN (SELECT id FROM taken)
  ) t
  GROUP BY endpoint_id
), settled AS (
  UPDATE endpoint_queues q SET
    in_flight = q.in_flight + n.claimed,
    queued = GREATEST(0, q.queued - n.claimed),
    next_due_at = CASE WHEN n.changed THEN LEAST(n.next_due, n.latest_due) ELSE n.next_due END,
    concurrency_limit = LEAST(q.concurrency_limit, $4),
    rate_tat_us = CASE WHEN n.rate_interval_us IS NULL OR n.claimed = 0 THEN q.rate_tat_us
      ELSE n.tat_from + n.claimed * n.rate_interval_us END,
    throttled_until = CASE WHEN n.rate_interval_us IS NULL OR n.claimed = 0 THEN q.throttled_until
      ELSE (n.tat_from + n.claimed * n.rate_interval_us - n.rate_tolerance_us + 999) / 1000 END
  FROM (
    SELECT s.endpoint_id, s.changed, s.latest_due, s.tat_from, s.rate_interval_us, s.rate_tolerance_us,
      COALESCE(t.claimed, 0) AS claimed, t.next_due
    FROM shares s LEFT JOIN tally t ON t.endpoint_id = s.endpoint_id
    WHERE s.settles
  ) n
  WHERE q.endpoint_id = n.endpoint_id AND q.endpoint_id = ANY(ARRAY(SELECT endpoint_id FROM shares WHERE settles))
)
SELECT c.id, c.message_id, c.endpoint_id, c.tenant_id, c.event_type, c.attempts, c.first_headers, c.replay_of,
  c.ordering_key,
  m.payload, m.is_test, m.trace_context, e.url, e.secret, e.previous_secret, e.previous_secret_expires_at, e.headers AS endpoint_headers,
  (e.failing_since IS NULL AND e.circuit_open_until IS NULL) AS endpoint_healthy,
  -- A rate-limited attempt's slot in the pace, one interval after the one before whoever claimed it,
  -- plus the send delay (store/endpoint-queues.ts, pacedSendDelayUs). The order is the candidates'
  -- rank, taken from the claimed rows themselves: the generic plan guesses one row for every CTE, so a
  -- join back to \`candidates\` was a nested loop, claimed × candidates comparisons per claim.
  CASE WHEN r.rate_interval_us IS NOT NULL THEN (r.tat_from
    + (ROW_NUMBER() OVER (PARTITION BY c.endpoint_id ORDER BY c.next_attempt_at, c.id) - 1) * r.rate_interval_us
    + LEAST(${PACED_SEND_DELAY_MAX_US}, ${PACED_SEND_DELAY_INTERVALS} * r.rate_interval_us)) / 1000
  END AS send_at
FROM claimed c JOIN messages m ON m.id = c.message_id JOIN endpoints e ON e.id = c.endpoint_id
  JOIN ready r ON r.endpoint_id = c.endpoint_id`;

export async function claimPostgres(db: Queryable, o: ClaimOptions): Promise<ClaimedAttempt[]> {
  return db.all<ClaimedAttempt>(CLAIM, [o.now, o.leaseUntil, o.limit, o.ceiling, o.now * 1000]);
}
