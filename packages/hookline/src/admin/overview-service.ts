// What the console shows besides dead letters: tenants, their endpoints with health and backlog, and
// delivery throughput and queue depth over time.
import type { Context } from '../context.js';
import { toEndpointView } from '../endpoints/endpoint-service.js';
import { checkCursor, isoTime, toPage } from '../pagination.js';
import { countAwaitingByEndpoint, countDeadLetters } from '../store/dead-letters.js';
import { BUCKET_MS, endpointHealth, statsSeries } from '../store/delivery-stats.js';
import { getQueues, queueTotals } from '../store/endpoint-queues.js';
import { listEndpoints } from '../store/endpoints.js';
import { queueSamplesSince } from '../store/queue-samples.js';
import { listTenants } from '../store/tenants.js';
import { assertTenantId, TENANT_ID_PATTERN } from '../tenants.js';

const HEALTH_WINDOW_MS = 24 * 60 * 60 * 1000;
const TENANT_ID = new RegExp(TENANT_ID_PATTERN);

export async function listTenantViews(ctx: Context, limit: number, cursor: string | null) {
  const after = checkCursor(cursor, (c) => TENANT_ID.test(c));
  return toPage(await listTenants(ctx.db, limit + 1, after), limit, (t) => ({
    id: t.id,
    created_at: isoTime(t.created_at),
    endpoints: {
      active: Number(t.endpoints_active),
      paused: Number(t.endpoints_paused),
      disabled: Number(t.endpoints_disabled),
      deleted: Number(t.endpoints_deleted),
    },
  }));
}

/**
 * Every endpoint of a tenant (deleted ones too) with its last 24 hours of outcomes, its backlog, and
 * how the engine treats it now: its adaptive in-flight limit and any pause (docs/architecture.md).
 */
export async function tenantEndpointHealth(ctx: Context, tenantId: string) {
  assertTenantId(tenantId);
  const now = ctx.clock();
  // The current rate: attempts counted in the statistics bucket before this one and this one so far.
  const rateSince = Math.floor(now / BUCKET_MS) * BUCKET_MS - BUCKET_MS;
  const [active, deleted, health, recent, awaiting] = await Promise.all([
    listEndpoints(ctx.db, tenantId, { limit: 1000, before: null, status: null }),
    listEndpoints(ctx.db, tenantId, { limit: 1000, before: null, status: 'deleted' }),
    endpointHealth(ctx.db, now - HEALTH_WINDOW_MS, tenantId),
    endpointHealth(ctx.db, rateSince, tenantId),
    countAwaitingByEndpoint(ctx.db, tenantId),
  ]);
  const rows = [...active, ...deleted];
  const queues = await getQueues(
    ctx.db,
    rows.map((r) => r.id),
  );
  const healthById = new Map(health.map((h) => [h.endpoint_id, h]));
  const queueById = new Map(queues.map((q) => [q.endpoint_id, q]));
  const recentById = new Map(recent.map((h) => [h.endpoint_id, h]));
  return {
    data: rows.map((row) => {
      const h = healthById.get(row.id);
      const q = queueById.get(row.id);
      const pausedUntil =
        q?.paused_until != null && Number(q.paused_until) > now ? Number(q.paused_until) : null;
      const r = recentById.get(row.id);
      const attempts = Number(r?.succeeded ?? 0) + Number(r?.failed ?? 0) + Number(r?.dead ?? 0);
      const succeeded = Number(h?.succeeded ?? 0);
      const failed = Number(h?.failed ?? 0) + Number(h?.dead ?? 0);
      return {
        ...toEndpointView(row, ctx.envelope),
        health: {
          window_hours: 24,
          succeeded,
          failed,
          dead: Number(h?.dead ?? 0),
          success_rate: succeeded + failed === 0 ? null : succeeded / (succeeded + failed),
          /** Its dead letters, of any age, not replayed or whose replay died: the overview's count, per endpoint. */
          dead_letters_awaiting: awaiting.get(row.id) ?? 0,
          /** Failed attempts refused before reaching the subscriber (docs/operators.md, "Refused connections"). */
          refused: {
            ssrf: Number(h?.refused_ssrf ?? 0),
            tls: Number(h?.refused_tls ?? 0),
            proxy: Number(h?.refused_proxy ?? 0),
          },
        },
        backlog: q ? Number(q.queued) + Number(q.in_flight) : 0,
        delivery: {
          in_flight: Number(q?.in_flight ?? 0),
          concurrency_limit: Math.min(Number(q?.concurrency_limit ?? 0), ctx.config.endpointConcurrency),
          concurrency_ceiling: ctx.config.endpointConcurrency,
          paused_until: pausedUntil === null ? null : isoTime(pausedUntil),
          circuit_open: row.circuit_open_until !== null && Number(row.circuit_open_until) > now,
          rate_limit: row.rate_limit === null ? null : Number(row.rate_limit),
          /** Attempts per second over the last one to two minutes. */
          attempts_per_second: attempts / ((now - rateSince) / 1000),
        },
      };
    }),
  };
}

/** Per-minute throughput and queue depth for the last `minutes`, plus the current depth. */
export async function deliveryStats(ctx: Context, minutes: number, tenantId: string | null) {
  const now = ctx.clock();
  const since = Math.floor((now - minutes * 60_000) / BUCKET_MS) * BUCKET_MS;
  const [throughput, queue, depth, deadLetters] = await Promise.all([
    statsSeries(ctx.db, since, tenantId),
    queueSamplesSince(ctx.db, since),
    queueTotals(ctx.db, now),
    countDeadLetters(ctx.db),
  ]);
  const at = isoTime;
  return {
    bucket_seconds: BUCKET_MS / 1000,
    throughput: throughput.map((p) => ({
      at: at(p.bucket),
      succeeded: Number(p.succeeded),
      failed: Number(p.failed),
      dead: Number(p.dead),
    })),
    queue: queue.map((s) => ({
      at: at(s.bucket),
      due: Number(s.due),
      scheduled: Number(s.scheduled),
      delivering: Number(s.delivering),
      dead_letters: Number(s.dead_letters),
    })),
    // The same counters /metrics reads (hookline_dead_letters, hookline_dead_letters_awaiting).
    current: {
      ...depth,
      dead_letters: deadLetters.stored,
      dead_letters_awaiting: deadLetters.awaiting,
      at: at(now),
    },
  };
}
