import { limitParam, type Queryable } from './db.js';

export const ROLES = ['tenant', 'producer', 'instance_manager'] as const;
export type Role = (typeof ROLES)[number];

export interface ApiKeyRow {
  id: string;
  key_hash: string;
  prefix: string;
  role: Role;
  tenant_id: string | null;
  label: string;
  created_at: number;
  revoked_at: number | null;
}

export async function insertApiKey(q: Queryable, row: Omit<ApiKeyRow, 'revoked_at'>): Promise<void> {
  await q.run(
    `INSERT INTO api_keys (id, key_hash, prefix, role, tenant_id, label, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [row.id, row.key_hash, row.prefix, row.role, row.tenant_id, row.label, row.created_at],
  );
}

export async function findApiKeyByHash(q: Queryable, keyHash: string): Promise<ApiKeyRow | undefined> {
  return q.one<ApiKeyRow>('SELECT * FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL', [keyHash]);
}

export async function listApiKeys(q: Queryable, limit: number, before: string | null): Promise<ApiKeyRow[]> {
  return q.all<ApiKeyRow>(
    `SELECT * FROM api_keys WHERE ($1 = '' OR id < $1) ORDER BY id DESC ${limitParam(2)}`,
    [before ?? '', limit],
  );
}

/**
 * Revokes a key; answers its row (undefined: no such key) and whether this call revoked it (false: it
 * was revoked already, and keeps its first revocation time).
 */
export async function revokeApiKey(
  q: Queryable,
  id: string,
  now: number,
): Promise<{ row: ApiKeyRow; revokedNow: boolean } | undefined> {
  const changed = await q.run('UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL', [
    id,
    now,
  ]);
  const row = await q.one<ApiKeyRow>('SELECT * FROM api_keys WHERE id = $1', [id]);
  return row && { row, revokedNow: changed === 1 };
}
