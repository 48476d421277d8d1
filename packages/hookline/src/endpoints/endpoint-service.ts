// The tenant-facing endpoint operations of /v1/webhooks. Callers pass an already-authorised tenant id;
// another tenant's endpoint is simply not found.
import { findInvalidEventFilters, invalidEventFiltersMessage } from '../catalogue/index.js';
import type { Context } from '../context.js';
import { HooklineError, notFound } from '../errors.js';
import { isId, newId } from '../ids.js';
import { checkCursor, isoTime, toPage, type Page } from '../pagination.js';
import { checkEndpointUrl } from '../net/index.js';
import { releaseEndpoint } from '../engine/circuit-breaker.js';
import { cancelForEndpoint } from '../store/deliveries.js';
import { createQueue, lockQueues, setQueueActive, setQueueRate } from '../store/endpoint-queues.js';
import {
  countLiveEndpoints,
  getEndpoint,
  insertEndpoint,
  listEndpoints,
  lockEndpoint,
  updateEndpoint,
  type EndpointChanges,
  type EndpointRow,
  type EndpointStatus,
  type SignatureScheme,
} from '../store/endpoints.js';
import type { Queryable } from '../store/db.js';
import { ensureTenant, lockTenant } from '../store/tenants.js';
import type { Envelope } from '../crypto/envelope.js';
import { openHeaders, sealHeaders, secretAad } from '../engine/sealing.js';
import { checkHeaders } from './custom-headers.js';
import { newSigningKey, revealed } from './signing-keys.js';

export const ENDPOINT_LIMITS = {
  url: 2048,
  description: 1024,
  minEvents: 1,
  maxEvents: 50,
  minRateLimit: 1,
  maxRateLimit: 10_000,
} as const;

export interface EndpointView {
  id: string;
  url: string;
  events: string[];
  description: string;
  rate_limit: number | null;
  headers: Record<string, string>;
  signature_scheme: SignatureScheme;
  public_key: string | null;
  status: EndpointStatus;
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
}

/** The endpoint object of docs/contract.md §4.1; the envelope opens its sealed custom headers. */
export function toEndpointView(row: EndpointRow, envelope: Envelope): EndpointView {
  return {
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    description: row.description,
    rate_limit: row.rate_limit === null ? null : Number(row.rate_limit),
    headers: openHeaders(envelope, row.id, row.headers),
    signature_scheme: row.signature_scheme,
    public_key: row.public_key,
    status: row.status,
    disabled_reason: row.disabled_reason,
    created_at: isoTime(row.created_at),
    updated_at: isoTime(row.updated_at),
  };
}

function normaliseEvents(events: readonly string[]): string {
  const invalid = findInvalidEventFilters([...events]);
  if (invalid.length > 0) {
    throw new HooklineError('invalid_event_filter', invalidEventFiltersMessage(invalid), {
      invalid,
    });
  }
  if (events.length < ENDPOINT_LIMITS.minEvents) {
    throw new HooklineError(
      'invalid_event_filter',
      'events must list at least one event filter (use "*" for all)',
    );
  }
  return JSON.stringify([...new Set(events)]);
}

async function checkUrl(ctx: Context, url: string): Promise<string> {
  const result = await checkEndpointUrl(url, { allowPrivateNetworks: ctx.config.allowPrivateNetworks });
  if (!result.ok) throw new HooklineError(result.code, result.message);
  // What is stored is the normalised form, which percent-encoding can make several times longer
  // than what was sent ("é" → "%C3%A9"); the limit holds for what is stored and answered.
  if (result.url.href.length > ENDPOINT_LIMITS.url) {
    throw new HooklineError(
      'invalid_url',
      `url must be at most ${ENDPOINT_LIMITS.url} characters once normalised (percent-encoded)`,
    );
  }
  return result.url.href;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkDescription(description: string): string {
  // PostgreSQL text cannot hold NUL (the insert would fail with a 500), and an unpaired surrogate
  // would be stored as U+FFFD, so what GET answers would differ from what was sent.
  if (description.includes('\u0000') || LONE_SURROGATE.test(description)) {
    throw new HooklineError(
      'validation_failed',
      'description must be valid Unicode text without NUL characters',
    );
  }
  return description;
}

function checkId(id: string): void {
  if (!isId('endpoint', id)) throw notFound('webhook endpoint');
}

async function load(ctx: Context, tenantId: string, id: string): Promise<EndpointRow> {
  checkId(id);
  const row = await getEndpoint(ctx.db, tenantId, id);
  if (!row) throw notFound('webhook endpoint');
  return row;
}

/**
 * Every transition decides on the row as `lockEndpoint` reads it inside the transaction that writes
 * it, never on an earlier read: a read-then-write would let a concurrent DELETE be undone by a PATCH,
 * or a concurrent rotation's secret be dropped (docs/security.md, "Threats and the tests that cover them").
 */
async function lockForTransition(tx: Queryable, tenantId: string, id: string): Promise<EndpointRow> {
  const row = await lockEndpoint(tx, tenantId, id);
  if (!row) throw notFound('webhook endpoint');
  return row;
}

/**
 * Refuses one endpoint more than HOOKLINE_MAX_ENDPOINTS_PER_TENANT (docs/configuration.md). The tenant's
 * row is locked first, so two creates at once count each other and cannot both pass at the cap.
 */
async function checkEndpointCap(ctx: Context, tx: Queryable, tenantId: string): Promise<void> {
  await lockTenant(tx, tenantId);
  const max = ctx.config.maxEndpointsPerTenant;
  if ((await countLiveEndpoints(tx, tenantId)) >= max) {
    throw new HooklineError(
      'endpoint_limit_reached',
      `this tenant already has ${max} endpoints that are not deleted, the most allowed ` +
        '(HOOKLINE_MAX_ENDPOINTS_PER_TENANT); delete one first',
    );
  }
}

const endpointDeleted = () =>
  new HooklineError('endpoint_deleted', 'this endpoint is deleted; restore it before changing it');

export interface CreateEndpointInput {
  url: string;
  events: string[];
  description?: string;
  rate_limit?: number | null;
  headers?: Record<string, string>;
  signature_scheme?: SignatureScheme;
}

/** A v1 endpoint's answer carries its secret; a v1a endpoint's its public key (on the view already). */
export async function createEndpoint(
  ctx: Context,
  tenantId: string,
  input: CreateEndpointInput & { signature_scheme?: 'v1' },
): Promise<EndpointView & { signing_secret: string }>;
export async function createEndpoint(
  ctx: Context,
  tenantId: string,
  input: CreateEndpointInput,
): Promise<EndpointView & ({ signing_secret: string } | { public_key: string })>;
export async function createEndpoint(
  ctx: Context,
  tenantId: string,
  input: CreateEndpointInput,
): Promise<EndpointView & ({ signing_secret: string } | { public_key: string })> {
  const events = normaliseEvents(input.events);
  const headers = checkHeaders(input.headers ?? {});
  const url = await checkUrl(ctx, input.url);
  const now = ctx.clock();
  const id = newId('endpoint', now);
  const scheme = input.signature_scheme ?? 'v1';
  const key = newSigningKey(scheme);
  const row: EndpointRow = {
    id,
    tenant_id: tenantId,
    url,
    events,
    description: checkDescription(input.description ?? ''),
    status: 'active',
    disabled_reason: null,
    secret: ctx.envelope.seal(key.stored, secretAad(id, 'current')),
    previous_secret: null,
    previous_secret_expires_at: null,
    failing_since: null,
    circuit_open_until: null,
    created_at: now,
    updated_at: now,
    deleted_at: null,
    rate_limit: input.rate_limit ?? null,
    headers: sealHeaders(ctx.envelope, id, headers),
    signature_scheme: scheme,
    public_key: key.publicKey,
  };
  await ctx.db.transaction(async (tx) => {
    await ensureTenant(tx, tenantId, now);
    await checkEndpointCap(ctx, tx, tenantId);
    await insertEndpoint(tx, row);
    await createQueue(tx, id);
    if (row.rate_limit !== null) await setQueueRate(tx, id, row.rate_limit);
  });
  return { ...toEndpointView(row, ctx.envelope), ...revealed(scheme, key) };
}

export async function getEndpointView(ctx: Context, tenantId: string, id: string): Promise<EndpointView> {
  return toEndpointView(await load(ctx, tenantId, id), ctx.envelope);
}

export async function listEndpointViews(
  ctx: Context,
  tenantId: string,
  opts: { limit: number; cursor: string | null; status: EndpointStatus | null },
): Promise<Page<EndpointView>> {
  const rows = await listEndpoints(ctx.db, tenantId, {
    limit: opts.limit + 1,
    before: checkCursor(opts.cursor, 'endpoint'),
    status: opts.status,
  });
  return toPage(rows, opts.limit, (row) => toEndpointView(row, ctx.envelope));
}

export async function patchEndpoint(
  ctx: Context,
  tenantId: string,
  id: string,
  input: {
    url?: string;
    events?: string[];
    description?: string;
    rate_limit?: number | null;
    headers?: Record<string, string>;
    status?: 'active' | 'paused';
  },
): Promise<EndpointView> {
  // Refused before the URL check (a DNS lookup), which must stay out of the transaction.
  if ((await load(ctx, tenantId, id)).status === 'deleted') throw endpointDeleted();
  const changes: EndpointChanges = {};
  if (input.events !== undefined) changes.events = normaliseEvents(input.events);
  if (input.url !== undefined) changes.url = await checkUrl(ctx, input.url);
  if (input.description !== undefined) changes.description = checkDescription(input.description);
  if (input.rate_limit !== undefined) changes.rate_limit = input.rate_limit;
  // The whole map is replaced: {} removes every custom header.
  if (input.headers !== undefined)
    changes.headers = sealHeaders(ctx.envelope, id, checkHeaders(input.headers));
  // docs/contract.md §4.1: "active" resumes a paused endpoint or re-enables a disabled one; "paused"
  // stops attempts (whatever the endpoint's state, a disabled one included) while fan-out goes on.
  const reenable = input.status === 'active';
  const pause = input.status === 'paused';
  if (input.status !== undefined) {
    changes.status = input.status;
    changes.disabled_reason = null;
    changes.failing_since = null;
  }
  const now = ctx.clock();
  const updated = await ctx.db.transaction(async (tx) => {
    // The queue row goes first: the lock order (store/endpoint-queues.ts).
    await lockQueues(tx, [id]);
    if ((await lockForTransition(tx, tenantId, id)).status === 'deleted') throw endpointDeleted();
    // Re-enabled: a fresh start, with the deliveries that waited while it was disabled due now.
    if (reenable) await releaseEndpoint(tx, id, now);
    if (pause) await setQueueActive(tx, id, false, now);
    if (input.rate_limit !== undefined) await setQueueRate(tx, id, input.rate_limit);
    return updateEndpoint(tx, id, changes, now);
  });
  if (reenable) ctx.signal.notify();
  return toEndpointView(updated, ctx.envelope);
}

export async function deleteEndpoint(ctx: Context, tenantId: string, id: string): Promise<EndpointView> {
  checkId(id);
  const now = ctx.clock();
  const row = await ctx.db.transaction(async (tx) => {
    // The endpoint row is locked before its deliveries here; safe, as every transaction that locks
    // them and then this row (recording outcomes) holds the queue row first, as this one does.
    await lockQueues(tx, [id]);
    const current = await lockForTransition(tx, tenantId, id);
    if (current.status === 'deleted') return current;
    await cancelForEndpoint(tx, id, now);
    return updateEndpoint(tx, id, { status: 'deleted', deleted_at: now }, now);
  });
  return toEndpointView(row, ctx.envelope);
}

export async function restoreEndpoint(ctx: Context, tenantId: string, id: string): Promise<EndpointView> {
  checkId(id);
  const now = ctx.clock();
  const row = await ctx.db.transaction(async (tx) => {
    await lockQueues(tx, [id]);
    const current = await lockForTransition(tx, tenantId, id);
    if (current.status !== 'deleted') {
      throw new HooklineError(
        'endpoint_not_deleted',
        `this endpoint is ${current.status}, not deleted; nothing to restore`,
      );
    }
    await checkEndpointCap(ctx, tx, tenantId);
    await setQueueActive(tx, id, true, now);
    return updateEndpoint(
      tx,
      id,
      {
        status: 'active',
        deleted_at: null,
        disabled_reason: null,
        failing_since: null,
        circuit_open_until: null,
      },
      now,
    );
  });
  return toEndpointView(row, ctx.envelope);
}

export async function rotateSecret(
  ctx: Context,
  tenantId: string,
  id: string,
  gracePeriodSeconds: number,
  newScheme?: SignatureScheme,
): Promise<{ id: string } & ({ signing_secret: string } | { public_key: string })> {
  checkId(id);
  const now = ctx.clock();
  // Without a scheme the rotation keeps the endpoint's (read under the lock below); the key of each
  // scheme is made before the transaction, so no key generation runs while the row is locked.
  const keys = { v1: newSigningKey('v1'), v1a: newSigningKey('v1a') };
  const scheme = await ctx.db.transaction(async (tx) => {
    // The secret kept for the grace is the one current under the lock, so of two rotations at once
    // the later keeps the earlier's. A rotation ends any earlier grace: at most two remain.
    const row = await lockForTransition(tx, tenantId, id);
    const scheme = newScheme ?? row.signature_scheme;
    const key = keys[scheme];
    // The old key keeps signing through the grace, whatever its scheme: switching schemes, an
    // attempt then carries one signature of each (docs/contract.md §5).
    const previous =
      gracePeriodSeconds > 0
        ? ctx.envelope.seal(
            ctx.envelope.open(row.secret, secretAad(id, 'current')),
            secretAad(id, 'previous'),
          )
        : null;
    await updateEndpoint(
      tx,
      id,
      {
        secret: ctx.envelope.seal(key.stored, secretAad(id, 'current')),
        previous_secret: previous,
        previous_secret_expires_at: previous ? now + gracePeriodSeconds * 1000 : null,
        signature_scheme: scheme,
        public_key: key.publicKey,
      },
      now,
    );
    return scheme;
  });
  return { id, ...revealed(scheme, keys[scheme]) };
}
