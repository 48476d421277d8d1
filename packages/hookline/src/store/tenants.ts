import { limitParam, type Queryable } from './db.js';

export interface TenantSummary {
  id: string;
  created_at: number;
  endpoints_active: number;
  endpoints_paused: number;
  endpoints_disabled: number;
  endpoints_deleted: number;
}

export async function ensureTenant(q: Queryable, id: string, now: number): Promise<void> {
  await q.run('INSERT INTO tenants (id, created_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', [id, now]);
}

/**
 * Locks a tenant's row until the transaction ends, so checks over all of its endpoints (the cap on
 * how many it may have) hold when the transaction writes. NO KEY UPDATE: emits and endpoint inserts,
 * whose foreign keys take KEY SHARE on this row, are not held up. SQLite's write transaction holds off
 * every other writer already.
 */
export async function lockTenant(q: Queryable, id: string): Promise<void> {
  if (q.dialect !== 'postgres') return;
  await q.one('SELECT id FROM tenants WHERE id = $1 FOR NO KEY UPDATE', [id]);
}

export async function listTenants(
  q: Queryable,
  limit: number,
  after: string | null,
): Promise<TenantSummary[]> {
  return q.all<TenantSummary>(
    `SELECT t.id, t.created_at,
        COALESCE(SUM(CASE WHEN e.status = 'active' THEN 1 ELSE 0 END), 0) AS endpoints_active,
        COALESCE(SUM(CASE WHEN e.status = 'paused' THEN 1 ELSE 0 END), 0) AS endpoints_paused,
        COALESCE(SUM(CASE WHEN e.status = 'disabled' THEN 1 ELSE 0 END), 0) AS endpoints_disabled,
        COALESCE(SUM(CASE WHEN e.status = 'deleted' THEN 1 ELSE 0 END), 0) AS endpoints_deleted
     FROM tenants t LEFT JOIN endpoints e ON e.tenant_id = t.id
     WHERE ($1 = '' OR t.id > $1)
     GROUP BY t.id, t.created_at
     ORDER BY t.id
     ${limitParam(2)}`,
    [after ?? '', limit],
  );
}
