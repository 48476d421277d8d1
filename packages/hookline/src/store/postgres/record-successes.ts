// A flush of successes on PostgreSQL in one statement, one round trip instead of six (begin, queue
// lock, complete, statistics, queue settlement, commit): the common case of a healthy subscriber
// (docs/architecture.md, "Recording outcomes"). The queue rows are locked first, in id order, before
// any delivery is touched, as every transaction does.
import { settlementAssignments } from '../endpoint-queues.js';
import { notIndexed, type Queryable } from '../db.js';
import type { FencedRow, SuccessRecord } from '../attempts.js';

const STATEMENT = `
WITH items AS (
  SELECT * FROM jsonb_to_recordset($1::jsonb)
    AS t(item_id text, item_attempt int, item_status int, item_endpoint text, item_tenant text, item_fast int,
      item_us bigint)
), locked AS (
  SELECT endpoint_id FROM endpoint_queues
  WHERE endpoint_id = ANY(ARRAY(SELECT DISTINCT item_endpoint FROM items))
  ORDER BY endpoint_id FOR UPDATE
), completed AS (
  UPDATE deliveries d SET status = 'succeeded', last_status = i.item_status, last_error = NULL,
    last_response = NULL, lease_expires_at = NULL, completed_at = $2, updated_at = $2
  FROM items i
  WHERE d.id = ANY(ARRAY(SELECT item_id FROM items)) AND d.id = i.item_id
    AND ${notIndexed("d.status = 'delivering'")} AND d.attempts = i.item_attempt
    AND (SELECT COUNT(*) FROM locked) >= 0
  RETURNING d.id, d.endpoint_id, d.ordering_key, i.item_tenant, i.item_fast, i.item_us
), per_endpoint AS (
  SELECT endpoint_id AS item_endpoint, MIN(item_tenant) AS item_tenant, COUNT(*)::int AS item_finished,
    0 AS item_requeued, NULL::bigint AS item_due, SUM(item_fast)::int AS item_fast, 0 AS item_congested,
    NULL::bigint AS item_pause, COUNT(item_us)::int AS item_answers, SUM(item_us)::bigint AS item_answer_us,
    MIN(item_us) AS item_answer_min_us
  FROM completed GROUP BY endpoint_id
), stats AS (
  INSERT INTO delivery_stats (bucket, endpoint_id, tenant_id, succeeded, failed, dead)
  SELECT $3, item_endpoint, item_tenant, item_finished, 0, 0 FROM per_endpoint ORDER BY item_endpoint
  ON CONFLICT (bucket, endpoint_id) DO UPDATE SET succeeded = delivery_stats.succeeded + excluded.succeeded
), settled AS (
  UPDATE endpoint_queues SET ${settlementAssignments('postgres', '$4', 'CAST($2 AS BIGINT)')}
  FROM per_endpoint t WHERE endpoint_queues.endpoint_id = t.item_endpoint
)
SELECT id, endpoint_id, ordering_key FROM completed`;

export async function recordSuccessesPostgres(
  q: Queryable,
  items: readonly SuccessRecord[],
  now: number,
  bucket: number,
  ceiling: number,
): Promise<FencedRow[]> {
  return q.all<FencedRow>(STATEMENT, [
    JSON.stringify(
      items.map((i) => ({
        item_id: i.id,
        item_attempt: i.attempt,
        item_status: i.status,
        item_endpoint: i.endpoint_id,
        item_tenant: i.tenant_id,
        item_fast: i.fast ? 1 : 0,
        item_us: i.answerMs === null ? null : Math.round(i.answerMs * 1000),
      })),
    ),
    now,
    bucket,
    ceiling,
  ]);
}
