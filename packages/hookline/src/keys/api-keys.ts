// API keys: `hk_<role letter>_<32 random bytes, base64url>`, shown once, stored only as a SHA-256 hash.
// SHA-256 is enough for 256-bit random keys (nothing to brute-force), and lets a key be found by hash.
import type { Context } from '../context.js';
import { constantTimeEqualHex, randomToken, sha256Hex } from '../crypto/hashing.js';
import { HooklineError } from '../errors.js';
import { isId, newId } from '../ids.js';
import { checkCursor, isoTime, toPage } from '../pagination.js';
import { audit, type Actor } from '../engine/audit.js';
import {
  findApiKeyByHash,
  insertApiKey,
  listApiKeys,
  revokeApiKey,
  type ApiKeyRow,
  type Role,
} from '../store/api-keys.js';
import { ensureTenant } from '../store/tenants.js';
import { assertTenantId } from '../tenants.js';

const ROLE_LETTER: Record<Role, string> = { tenant: 't', producer: 'p', instance_manager: 'i' };

export interface Principal {
  keyId: string | null;
  role: Role;
  tenantId: string | null;
}

export interface CreatedKey {
  key: string;
  record: ApiKeyRow;
}

/** Creates a key; `actor` (who asked for it) is recorded in the audit log in the same transaction. */
export async function createApiKey(
  ctx: Context,
  input: { role: Role; tenantId?: string | null; label?: string },
  actor: Actor,
): Promise<CreatedKey> {
  const tenantId = input.tenantId ?? null;
  if (input.role === 'tenant') {
    if (tenantId === null) throw new HooklineError('validation_failed', 'a tenant key needs a tenant id');
    assertTenantId(tenantId);
  } else if (tenantId !== null) {
    throw new HooklineError(
      'validation_failed',
      `a ${input.role} key belongs to no tenant; omit the tenant id`,
    );
  }
  const key = `hk_${ROLE_LETTER[input.role]}_${randomToken(32)}`;
  const now = ctx.clock();
  const record: ApiKeyRow = {
    id: newId('apiKey', now),
    key_hash: sha256Hex(key),
    prefix: key.slice(0, 10),
    role: input.role,
    tenant_id: tenantId,
    label: input.label ?? '',
    created_at: now,
    revoked_at: null,
  };
  await ctx.db.transaction(async (tx) => {
    await insertApiKey(tx, record);
    if (tenantId !== null) await ensureTenant(tx, tenantId, now);
    await audit(tx, actor, 'api_key.create', record.id, { role: record.role, tenant_id: tenantId }, now);
  });
  return { key, record };
}

/**
 * Revokes a key (undefined: no such key), recorded in the same transaction; this process forgets it at
 * once. A key revoked already is left as it was, unrecorded: `alreadyRevoked` (docs/operators.md, "Your key").
 */
export async function revokeKey(
  ctx: Context,
  id: string,
  actor: Actor,
): Promise<{ row: ApiKeyRow; alreadyRevoked: boolean } | undefined> {
  if (!isId('apiKey', id)) return undefined;
  const result = await ctx.db.transaction(async (tx) => {
    const now = ctx.clock();
    const revoked = await revokeApiKey(tx, id, now);
    if (revoked?.revokedNow) await audit(tx, actor, 'api_key.revoke', revoked.row.id, {}, now);
    return revoked && { row: revoked.row, alreadyRevoked: !revoked.revokedNow };
  });
  forgetKeys(ctx);
  return result;
}

/**
 * How long an answer about a key is reused. A key lookup per request was a tenth of an emit's cost; a
 * revocation made elsewhere (the CLI, another API process) takes effect within this, one made through
 * this process's API at once (forgetKeys).
 */
export const KEY_CACHE_MS = 1000;
const KEY_CACHE_MAX = 10_000;

interface CachedKey {
  principal: Principal | null;
  until: number;
}

const keyCaches = new WeakMap<Context, Map<string, CachedKey>>();

/** Forgets every cached key answer of this process, e.g. after a revocation. */
export function forgetKeys(ctx: Context): void {
  keyCaches.get(ctx)?.clear();
}

/** The principal behind a bearer key, or null for a missing, malformed, unknown or revoked key. */
export async function authenticate(ctx: Context, key: string | undefined): Promise<Principal | null> {
  if (!key || !/^hk_[tpi]_[A-Za-z0-9_-]{43}$/.test(key)) return null;
  let cache = keyCaches.get(ctx);
  if (!cache) keyCaches.set(ctx, (cache = new Map()));
  const now = ctx.clock();
  const cached = cache.get(key);
  if (cached && cached.until > now) return cached.principal;
  const hash = sha256Hex(key);
  const row = await findApiKeyByHash(ctx.db, hash);
  const principal =
    !row || !constantTimeEqualHex(row.key_hash, hash)
      ? null
      : { keyId: row.id, role: row.role, tenantId: row.tenant_id };
  if (cache.size >= KEY_CACHE_MAX) cache.clear();
  cache.set(key, { principal, until: now + KEY_CACHE_MS });
  return principal;
}

/** A page of keys, newest first, never their secret part (the API's and the CLI's list). */
export async function listApiKeyViews(ctx: Context, limit: number, cursor: string | null) {
  const rows = await listApiKeys(ctx.db, limit + 1, checkCursor(cursor, 'apiKey'));
  return toPage(rows, limit, publicApiKey);
}

export function publicApiKey(row: ApiKeyRow) {
  return {
    id: row.id,
    prefix: row.prefix,
    role: row.role,
    tenant_id: row.tenant_id,
    label: row.label,
    created_at: isoTime(row.created_at),
    revoked_at: isoTime(row.revoked_at),
  };
}
