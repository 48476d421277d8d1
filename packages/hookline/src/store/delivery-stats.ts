// Per-minute, per-endpoint outcome counters: what the console charts and health columns read,
// without keeping a row per attempt forever.
import { jsonRecords, type Queryable } from './db.js';

export const BUCKET_MS = 60_000;

/** Failed attempts (failed or dead) that were refused before reaching the subscriber, by reason. */
export interface Refused {
  refused_ssrf: number;
  refused_tls: number;
  refused_proxy: number;
}

export const REFUSAL_COLUMNS = ['refused_ssrf', 'refused_tls', 'refused_proxy'] as const;

export interface StatsIncrement extends Refused {
  bucket: number;
  endpoint_id: string;
  tenant_id: string;
  succeeded: number;
  failed: number;
  dead: number;
}

/** Counts of nothing yet for one endpoint and minute, to count a flush's outcomes into. */
export function emptyStats(bucket: number, endpointId: string, tenantId: string): StatsIncrement {
  return {
    bucket,
    endpoint_id: endpointId,
    tenant_id: tenantId,
    succeeded: 0,
    failed: 0,
    dead: 0,
    refused_ssrf: 0,
    refused_tls: 0,
    refused_proxy: 0,
  };
}

/** Adds a flush's counts, one upsert for all its endpoints, in key order. */
export async function addStats(q: Queryable, increments: Iterable<StatsIncrement>): Promise<void> {
  const rows = [...increments].sort((a, b) =>
    a.bucket !== b.bucket ? a.bucket - b.bucket : a.endpoint_id < b.endpoint_id ? -1 : 1,
  );
  if (rows.length === 0) return;
  const t = jsonRecords(q.dialect, 1, {
    bucket: 'bigint',
    endpoint_id: 'text',
    tenant_id: 'text',
    succeeded: 'int',
    failed: 'int',
    dead: 'int',
    refused_ssrf: 'int',
    refused_tls: 'int',
    refused_proxy: 'int',
  });
  const counts = ['succeeded', 'failed', 'dead', ...REFUSAL_COLUMNS];
  await q.run(
    // `WHERE true` lets SQLite tell the upsert's ON CONFLICT from a join constraint.
    `INSERT INTO delivery_stats (bucket, endpoint_id, tenant_id, ${counts.join(', ')})
     SELECT bucket, endpoint_id, tenant_id, ${counts.join(', ')} FROM ${t} WHERE true
     ON CONFLICT (bucket, endpoint_id) DO UPDATE SET
       ${counts.map((c) => `${c} = delivery_stats.${c} + excluded.${c}`).join(',\n       ')}`,
    [JSON.stringify(rows)],
  );
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

export interface EndpointHealth extends Refused {
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
    `SELECT endpoint_id, SUM(succeeded) AS succeeded, SUM(failed) AS failed, SUM(dead) AS dead,
       SUM(refused_ssrf) AS refused_ssrf, SUM(refused_tls) AS refused_tls, SUM(refused_proxy) AS refused_proxy
     FROM delivery_stats WHERE bucket >= $1 AND tenant_id = $2 GROUP BY endpoint_id`,
    [since, tenantId],
  );
}
