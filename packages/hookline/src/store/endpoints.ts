import { greatest, least, limitParam, placeholders, type Queryable } from './db.js';

export const ENDPOINT_STATUSES = ['active', 'paused', 'disabled', 'deleted'] as const;
export type EndpointStatus = (typeof ENDPOINT_STATUSES)[number];
export const SIGNATURE_SCHEMES = ['v1', 'v1a'] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];

export interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  /** JSON array of event filters. */
  events: string;
  description: string;
  status: EndpointStatus;
  disabled_reason: string | null;
  secret: Buffer;
  previous_secret: Buffer | null;
  previous_secret_expires_at: number | null;
  failing_since: number | null;
  /** Set while the circuit is open: the endpoint's queue is paused until then (engine/circuit-breaker.ts). */
  circuit_open_until: number | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
  /** At most this many attempts per second, all workers together; null for no limit (§4.1). */
  rate_limit: number | null;
  /** Sealed JSON object of custom request headers (endpoints/custom-headers.ts); null for none. */
  headers: Buffer | null;
  /** v1: `secret` holds a whsec_ secret; v1a: a whsk_ Ed25519 private key, and `public_key` its whpk_. */
  signature_scheme: SignatureScheme;
  public_key: string | null;
}

export async function insertEndpoint(q: Queryable, row: EndpointRow): Promise<void> {
  await q.run(
    `INSERT INTO endpoints (id, tenant_id, url, events, description, status, disabled_reason, secret,
       previous_secret, previous_secret_expires_at, failing_since, created_at, updated_at, deleted_at, rate_limit, headers, signature_scheme, public_key)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
    [
      row.id,
      row.tenant_id,
      row.url,
      row.events,
      row.description,
      row.status,
      row.disabled_reason,
      row.secret,
      row.previous_secret,
      row.previous_secret_expires_at,
      row.failing_since,
      row.created_at,
      row.updated_at,
      row.deleted_at,
      row.rate_limit,
      row.headers,
      row.signature_scheme,
      row.public_key,
    ],
  );
}

export async function getEndpoint(
  q: Queryable,
  tenantId: string,
  id: string,
): Promise<EndpointRow | undefined> {
  return q.one<EndpointRow>('SELECT * FROM endpoints WHERE id = $1 AND tenant_id = $2', [id, tenantId]);
}

/**
 * Reads an endpoint for a transition, inside the transaction that writes it: on PostgreSQL the row
 * stays locked until that transaction ends, and SQLite's write transaction (BEGIN IMMEDIATE) holds off
 * every other writer already. What the transition checks (deleted or not, the secret it replaces) is
 * therefore still true when it writes: a PATCH cannot bring back an endpoint deleted meanwhile, and
 * two rotations each keep the secret the other just set. Lock the endpoint's queue row first where the
 * transition touches it (the lock order, store/endpoint-queues.ts).
 */
export async function lockEndpoint(
  q: Queryable,
  tenantId: string,
  id: string,
): Promise<EndpointRow | undefined> {
  // NO KEY UPDATE, as an UPDATE of the row would take: a fan-out inserting this endpoint's deliveries
  // (their foreign key takes KEY SHARE) is not held up, nor can it deadlock with the transition.
  const lock = q.dialect === 'postgres' ? 'FOR NO KEY UPDATE' : '';
  return q.one<EndpointRow>(`SELECT * FROM endpoints WHERE id = $1 AND tenant_id = $2 ${lock}`, [
    id,
    tenantId,
  ]);
}

/** How many endpoints a tenant has that are not deleted (HOOKLINE_MAX_ENDPOINTS_PER_TENANT counts these). */
export async function countLiveEndpoints(q: Queryable, tenantId: string): Promise<number> {
  const row = await q.one<{ n: number | string }>(
    "SELECT COUNT(*) AS n FROM endpoints WHERE tenant_id = $1 AND status <> 'deleted'",
    [tenantId],
  );
  return Number(row?.n ?? 0);
}

export async function getEndpointById(q: Queryable, id: string): Promise<EndpointRow | undefined> {
  return q.one<EndpointRow>('SELECT * FROM endpoints WHERE id = $1', [id]);
}

export async function listEndpoints(
  q: Queryable,
  tenantId: string,
  opts: { limit: number; before: string | null; status: EndpointStatus | null },
): Promise<EndpointRow[]> {
  return q.all<EndpointRow>(
    `SELECT * FROM endpoints
     WHERE tenant_id = $1 AND ($2 = '' OR id < $2)
       AND (($3 = '' AND status <> 'deleted') OR status = $3)
     ORDER BY id DESC ${limitParam(4)}`,
    [tenantId, opts.before ?? '', opts.status ?? '', opts.limit],
  );
}

/**
 * Endpoints of a tenant that take new deliveries, after `afterId`, in id order: the candidates of a
 * fan-out, read in bounded pages so a tenant with thousands of endpoints is fanned out in short
 * transactions. Paused endpoints are among them: their deliveries wait in a stopped queue until the
 * tenant resumes it (docs/contract.md §4.1); disabled and deleted ones are not.
 */
export async function listActiveEndpoints(
  q: Queryable,
  tenantId: string,
  afterId: string,
  limit: number,
): Promise<Pick<EndpointRow, 'id' | 'events'>[]> {
  return q.all(
    `SELECT id, events FROM endpoints WHERE tenant_id = $1 AND status IN ('active', 'paused') AND id > $2
     ORDER BY id ${limitParam(3)}`,
    [tenantId, afterId, limit],
  );
}

export type EndpointChanges = Partial<
  Pick<
    EndpointRow,
    | 'url'
    | 'events'
    | 'description'
    | 'status'
    | 'disabled_reason'
    | 'secret'
    | 'previous_secret'
    | 'previous_secret_expires_at'
    | 'failing_since'
    | 'circuit_open_until'
    | 'deleted_at'
    | 'rate_limit'
    | 'headers'
    | 'signature_scheme'
    | 'public_key'
  >
>;

const CHANGEABLE: readonly (keyof EndpointChanges)[] = [
  'url',
  'events',
  'description',
  'status',
  'disabled_reason',
  'secret',
  'previous_secret',
  'previous_secret_expires_at',
  'failing_since',
  'circuit_open_until',
  'deleted_at',
  'rate_limit',
  'headers',
  'signature_scheme',
  'public_key',
];

/** Writes a transition decided on a row read with `lockEndpoint` in the same transaction. */
export async function updateEndpoint(
  q: Queryable,
  id: string,
  changes: EndpointChanges,
  now: number,
): Promise<EndpointRow> {
  const sets: string[] = [];
  const params: (string | number | Buffer | null)[] = [id, now];
  for (const column of CHANGEABLE) {
    if (!(column in changes)) continue;
    params.push(changes[column] ?? null);
    sets.push(`${column} = $${params.length}`);
  }
  const row = await q.one<EndpointRow>(
    `UPDATE endpoints SET ${[...sets, 'updated_at = $2'].join(', ')} WHERE id = $1 RETURNING *`,
    params,
  );
  if (!row) throw new Error(`endpoint ${id} vanished inside its own transition`);
  return row;
}

/** A success ends an endpoint's failing streak. */
export async function markEndpointsHealthy(q: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await q.run(
    `UPDATE endpoints SET failing_since = NULL
     WHERE failing_since IS NOT NULL AND id IN (${placeholders(ids.length)})`,
    ids,
  );
}

/**
 * Records failures; an endpoint that has failed without a single success for `disableAfterMs` is
 * disabled, so a subscriber that is gone for good stops costing attempts. Answers the ids disabled.
 */
export async function markEndpointsFailing(
  q: Queryable,
  ids: readonly string[],
  now: number,
  disableAfterMs: number,
): Promise<string[]> {
  if (ids.length === 0) return [];
  const sorted = [...ids].sort();
  await q.run(
    `UPDATE endpoints SET failing_since = $1 WHERE failing_since IS NULL AND id IN (${placeholders(sorted.length, 2)})`,
    [now, ...sorted],
  );
  const days = Math.round(disableAfterMs / 86_400_000);
  return disable(q, sorted, `every delivery failed for ${days} days`, now, now - disableAfterMs);
}

/** Disables active endpoints; answers the ids it disabled. */
export async function disableEndpoints(
  q: Queryable,
  ids: readonly string[],
  reason: string,
  now: number,
): Promise<string[]> {
  return disable(q, ids, reason, now);
}

/**
 * Disables the active endpoints among `ids` (only those failing since `failingSinceBefore`, when
 * given), in id order, and stops their queues: their deliveries wait, out of every claim, until the
 * endpoint is re-enabled.
 */
async function disable(
  q: Queryable,
  ids: readonly string[],
  reason: string,
  now: number,
  failingSinceBefore?: number,
): Promise<string[]> {
  if (ids.length === 0) return [];
  const sorted = [...ids].sort();
  const params: (string | number)[] = [reason, now];
  if (failingSinceBefore !== undefined) params.push(failingSinceBefore);
  const failing = failingSinceBefore === undefined ? '' : 'AND failing_since <= $3';
  const rows = await q.all<{ id: string }>(
    `UPDATE endpoints SET status = 'disabled', disabled_reason = $1, updated_at = $2
     WHERE status = 'active' ${failing} AND id IN (${placeholders(sorted.length, params.length + 1)})
     RETURNING id`,
    [...params, ...sorted],
  );
  const disabled = rows.map((r) => r.id);
  if (disabled.length > 0) {
    await q.run(
      `UPDATE endpoint_queues SET active = 0 WHERE endpoint_id IN (${placeholders(disabled.length)})`,
      disabled,
    );
  }
  return disabled;
}

export async function disableEndpoint(
  q: Queryable,
  id: string,
  reason: string,
  now: number,
): Promise<boolean> {
  return (await disableEndpoints(q, [id], reason, now)).length === 1;
}

/**
 * Opens the circuits of active endpoints that have failed without a success for `breakAfterMs` and
 * whose circuit is not open already (or whose probe window has passed, so the probe failed). The pause
 * before the next probe grows with the outage: a quarter of it, within bounds. Answers each circuit
 * opened and until when.
 */
export async function openCircuits(
  q: Queryable,
  ids: readonly string[],
  now: number,
  breakAfterMs: number,
): Promise<{ id: string; until: number }[]> {
  if (ids.length === 0) return [];
  const sorted = [...ids].sort();
  const delay = `${least(q.dialect, `${breakAfterMs * 60}`, greatest(q.dialect, `${Math.floor(breakAfterMs / 6)}`, '($1 - failing_since) / 4'))}`;
  const rows = await q.all<{ id: string; until: number }>(
    `UPDATE endpoints SET circuit_open_until = $1 + ${delay}
     WHERE status = 'active' AND failing_since <= $2 AND (circuit_open_until IS NULL OR circuit_open_until <= $1)
       AND id IN (${placeholders(sorted.length, 3)})
     RETURNING id, circuit_open_until AS until`,
    [now, now - breakAfterMs, ...sorted],
  );
  return rows.map((r) => ({ id: r.id, until: Number(r.until) }));
}

/** Closes the circuits of these endpoints; answers the ids whose circuit was open. */
export async function closeCircuits(q: Queryable, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await q.all<{ id: string }>(
    `UPDATE endpoints SET circuit_open_until = NULL
     WHERE circuit_open_until IS NOT NULL AND id IN (${placeholders(ids.length)})
     RETURNING id`,
    ids,
  );
  return rows.map((r) => r.id);
}
