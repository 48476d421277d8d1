import { placeholders, type Queryable } from './db.js';

export const ENDPOINT_STATUSES = ['active', 'disabled', 'deleted'] as const;
export type EndpointStatus = (typeof ENDPOINT_STATUSES)[number];

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
  /** Set while the circuit is open (or a probe is under way): the endpoint's deliveries are parked. */
  circuit_open_until: number | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

export async function insertEndpoint(q: Queryable, row: EndpointRow): Promise<void> {
  await q.run(
    `INSERT INTO endpoints (id, tenant_id, url, events, description, status, disabled_reason, secret,
       previous_secret, previous_secret_expires_at, failing_since, created_at, updated_at, deleted_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
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
     ORDER BY id DESC LIMIT $4`,
    [tenantId, opts.before ?? '', opts.status ?? '', opts.limit],
  );
}

/** Active endpoints of a tenant: the candidates of a fan-out. */
export async function listActiveEndpoints(
  q: Queryable,
  tenantId: string,
): Promise<Pick<EndpointRow, 'id' | 'events' | 'circuit_open_until'>[]> {
  return q.all('SELECT id, events, circuit_open_until FROM endpoints WHERE tenant_id = $1 AND status = $2', [
    tenantId,
    'active',
  ]);
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
];

export async function updateEndpoint(
  q: Queryable,
  id: string,
  changes: EndpointChanges,
  now: number,
): Promise<EndpointRow | undefined> {
  const sets: string[] = [];
  const params: (string | number | Buffer | null)[] = [id, now];
  for (const column of CHANGEABLE) {
    if (!(column in changes)) continue;
    params.push(changes[column] ?? null);
    sets.push(`${column} = $${params.length}`);
  }
  await q.run(`UPDATE endpoints SET ${[...sets, 'updated_at = $2'].join(', ')} WHERE id = $1`, params);
  return getEndpointById(q, id);
}

export type EndpointForDelivery = Pick<
  EndpointRow,
  'id' | 'url' | 'status' | 'secret' | 'previous_secret' | 'previous_secret_expires_at'
>;

export async function getEndpointsForDelivery(
  q: Queryable,
  ids: readonly string[],
): Promise<EndpointForDelivery[]> {
  if (ids.length === 0) return [];
  return q.all(
    `SELECT id, url, status, secret, previous_secret, previous_secret_expires_at FROM endpoints
     WHERE id IN (${placeholders(ids.length)})`,
    ids,
  );
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
 * Records a failure; an endpoint that has failed without a single success for `disableAfterMs` is
 * disabled, so a subscriber that is gone for good stops costing attempts.
 */
export async function markEndpointFailing(
  q: Queryable,
  id: string,
  now: number,
  disableAfterMs: number,
): Promise<boolean> {
  await q.run('UPDATE endpoints SET failing_since = $2 WHERE id = $1 AND failing_since IS NULL', [id, now]);
  const days = Math.round(disableAfterMs / 86_400_000);
  const changed = await q.run(
    `UPDATE endpoints SET status = 'disabled', disabled_reason = $3, updated_at = $2
     WHERE id = $1 AND status = 'active' AND failing_since <= $4`,
    [id, now, `every delivery failed for ${days} days`, now - disableAfterMs],
  );
  return changed === 1;
}

export async function disableEndpoint(
  q: Queryable,
  id: string,
  reason: string,
  now: number,
): Promise<boolean> {
  const changed = await q.run(
    `UPDATE endpoints SET status = 'disabled', disabled_reason = $2, updated_at = $3 WHERE id = $1 AND status = 'active'`,
    [id, reason, now],
  );
  return changed === 1;
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

/** Opens (or re-opens) an endpoint's circuit until `until`. */
export async function openCircuit(q: Queryable, id: string, until: number): Promise<void> {
  await q.run('UPDATE endpoints SET circuit_open_until = $2 WHERE id = $1', [id, until]);
}

export async function getFailingSince(
  q: Queryable,
  id: string,
): Promise<Pick<EndpointRow, 'failing_since' | 'circuit_open_until' | 'status'> | undefined> {
  return q.one('SELECT failing_since, circuit_open_until, status FROM endpoints WHERE id = $1', [id]);
}

/**
 * Takes the endpoints whose open circuit is due for a probe, moving each one's `circuit_open_until`
 * to the end of the probe window so that no other worker probes it meanwhile.
 */
export async function takeCircuitsToProbe(q: Queryable, now: number, probeUntil: number): Promise<string[]> {
  const rows = await q.all<{ id: string }>(
    `UPDATE endpoints SET circuit_open_until = $2
     WHERE status = 'active' AND circuit_open_until IS NOT NULL AND circuit_open_until <= $1
     RETURNING id`,
    [now, probeUntil],
  );
  return rows.map((r) => r.id);
}
