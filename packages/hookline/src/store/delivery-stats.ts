// Per-minute, per-endpoint outcome counters: what the console charts and health columns read,
// without keeping a row per attempt forever.
import type { Queryable } from './db.js';

export const BUCKET_MS = 60_000;

export interface StatsIncrement {
  bucket: number;
  endpoint_id: string;
  tenant_id: string;
  succeeded: number;
  failed: number;
  dead: number;
}

export async function addStats(q: Queryable, increments: Iterable<StatsIncrement>): Promise<void> {
  for (const s of increments) {
    await q.run(
      `INSERT INTO delivery_stats (bucket, endpoint_id, tenant_id, succeeded, failed, dead)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (bucket, endpoint_id) DO UPDATE SET
         succeeded = delivery_stats.succeeded + excluded.succeeded,
         failed = delivery_stats.failed + excluded.failed,
         dead = delivery_stats.dead + excluded.dead`,
      [s.bucket, s.endpoint_id, s.tenant_id, s.succeeded, s.failed, s.dead],
    );
  }
}

export interface StatsPoint {
  bucket: number;
  succeeded: number;
  failed: number;
  dead: number;
}

export async function statsSeries(
  q: Queryable,
  since: number,
  tenantId: string | null,
): Promise<StatsPoint[]> {
  return q.all<StatsPoint>(
    `SELECT bucket, SUM(succeeded) AS succeeded, SUM(failed) AS failed, SUM(dead) AS dead
     FROM delivery_stats WHERE bucket >= $1 AND ($2 = '' OR tenant_id = $2)
     GROUP BY bucket ORDER BY bucket`,
    [since, tenantId ?? ''],
  );
}

export interface EndpointHealth {
  endpoint_id: string;
  succeeded: number;
  failed: number;
  dead: number;
}

export async function endpointHealth(
  q: Queryable,
  since: number,
  tenantId: string,
): Promise<EndpointHealth[]> {
  return q.all<EndpointHealth>(
    `SELECT endpoint_id, SUM(succeeded) AS succeeded, SUM(failed) AS failed, SUM(dead) AS dead
     FROM delivery_stats WHERE bucket >= $1 AND tenant_id = $2 GROUP BY endpoint_id`,
    [since, tenantId],
  );
}
