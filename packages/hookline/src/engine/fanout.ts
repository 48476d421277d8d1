// Fan-out: each message becomes one delivery per active endpoint of its tenant whose filter matches,
// as the endpoints are at fan-out time (docs/architecture.md, "Fan-out"). Work goes in bounded
// transactions: at most the store's fanOutChunk deliveries each (store/db.ts, Capabilities), so no
// transaction holds SQLite's writer for more than a few milliseconds, however many endpoints
// subscribe. A message with more matching endpoints than that is fanned out over several
// transactions; its fan-out queue row's `cursor` remembers the last endpoint done, so a crash in
// between resumes where it stopped and creates nothing twice.
import { matchesEventFilter } from '../catalogue/index.js';
import type { Context } from '../context.js';
import { newId } from '../ids.js';
import type { Queryable } from '../store/db.js';
import { insertDeliveries, type NewDelivery } from '../store/deliveries.js';
import { listActiveEndpoints } from '../store/endpoints.js';
import {
  advanceFanout,
  anyAwaitingFanout,
  claimForFanout,
  insertMessages,
  keyAwaitsFanout,
  nextOrderingSeqs,
  type MessageRow,
} from '../store/messages.js';
import type { Tracing } from '../telemetry/tracing.js';

/** Messages read per transaction. */
export const FANOUT_BATCH = 1024;
export interface FanoutResult {
  messages: number;
  deliveries: number;
}

/** Parsed event filters, kept while an endpoint's `events` text is unchanged. */
const filterCache = new Map<string, { events: string; filters: string[] }>();

function filtersOf(endpoint: { id: string; events: string }): string[] {
  const cached = filterCache.get(endpoint.id);
  if (cached?.events === endpoint.events) return cached.filters;
  const filters = JSON.parse(endpoint.events) as string[];
  if (filterCache.size > 10_000) filterCache.clear();
  filterCache.set(endpoint.id, { events: endpoint.events, filters });
  return filters;
}

export async function fanOutBatch(ctx: Context, limit = FANOUT_BATCH): Promise<FanoutResult> {
  const { fanOutChunk: chunk, readBeforeWrite } = ctx.db.capabilities;
  // Endpoints read per transaction, matching or not.
  const readBudget = 4 * chunk;
  // Where emits fan out (SQLite) a wake-up mostly finds nothing: an empty write transaction took the
  // writer from the emits ~500 times in a 10,000-event run.
  if (readBeforeWrite && !(await anyAwaitingFanout(ctx.db))) return { messages: 0, deliveries: 0 };
  // Only with tracing on (docs/operators.md, "Tracing"): each traced message's span, once committed.
  const traced: TracedFanout[] | null = ctx.tracing.enabled ? [] : null;
  const startMs = traced ? Date.now() : 0;
  const result = await ctx.db.transaction(async (tx) => {
    if (traced) traced.length = 0; // a transaction retried starts again
    // No more messages than one chunk of deliveries can take: the rest would be read for nothing.
    const messages = await claimForFanout(tx, Math.min(limit, chunk));
    if (messages.length === 0) return { messages: 0, deliveries: 0 };
    const now = ctx.clock();
    const rows: NewDelivery[] = [];
    const done: string[] = [];
    let partial: { id: string; cursor: string } | null = null;
    let reads = 0;
    // Messages of one tenant read the same pages of its endpoints: each page is read once here.
    const pages = new Map<string, Awaited<ReturnType<typeof listActiveEndpoints>>>();
    const page = async (tenantId: string, after: string) => {
      const key = `${tenantId} ${after}`;
      let rows = pages.get(key);
      if (!rows) {
        rows = await listActiveEndpoints(tx, tenantId, after, chunk);
        pages.set(key, rows);
        reads += rows.length;
      }
      return rows;
    };
    for (const message of messages) {
      const before = rows.length;
      let cursor = message.cursor ?? '';
      let complete = false;
      let full = false;
      while (!full && reads < readBudget) {
        const endpoints = await page(message.tenant_id, cursor);
        for (const endpoint of endpoints) {
          if (rows.length >= chunk) {
            full = true;
            break;
          }
          cursor = endpoint.id;
          if (matchesEventFilter(filtersOf(endpoint), message.event_type)) {
            rows.push(newDelivery(message, endpoint.id, message.ordering_seq, now));
          }
        }
        if (!full && endpoints.length < chunk) complete = true;
        if (complete) break;
      }
      if (traced && message.trace_context !== null)
        traced.push({ message, deliveries: rows.length - before });
      if (complete) done.push(message.id);
      else {
        partial = { id: message.id, cursor };
        break;
      }
      if (rows.length >= chunk) break;
    }
    // The messages first: inserting the deliveries updates their endpoints' queue rows, which a claim
    // skips while they are locked (PostgreSQL), so that comes last, just before the commit.
    await advanceFanout(tx, done, partial);
    await numberInFanoutOrder(tx, rows);
    await insertDeliveries(tx, rows, now);
    return { messages: done.length + (partial ? 1 : 0), deliveries: rows.length };
  });
  if (traced) traceFanouts(ctx.tracing, traced, startMs, false);
  return result;
}

/**
 * A keyed delivery's place in its line is numbered when a worker fans it out, not taken from its
 * emit: an event emitted inside a product's transaction (docs/producers.md, "Order") becomes visible at
 * that transaction's commit, which can come after a later emit of the same key was fanned out and is
 * waiting in the line; numbered at its emit, it would go ahead of that one. Numbered here, a line
 * takes deliveries in the order fan-out sees their events committed. The messages of a batch are
 * numbered in their emit order, and fan-out already takes a key's messages in emit order
 * (store/messages.ts, claimForFanout), so HTTP emits keep the order they were acknowledged in.
 */
async function numberInFanoutOrder(tx: Queryable, rows: NewDelivery[]): Promise<void> {
  const emitSeqs = new Map<string, number>();
  for (const r of rows) if (r.ordering_seq !== null) emitSeqs.set(r.message_id, r.ordering_seq);
  if (emitSeqs.size === 0) return;
  const inEmitOrder = [...emitSeqs].sort((a, b) => a[1] - b[1]);
  const seqs = await nextOrderingSeqs(tx, inEmitOrder.length);
  const fresh = new Map(inEmitOrder.map(([messageId], i) => [messageId, seqs[i]!]));
  for (const r of rows) if (r.ordering_seq !== null) r.ordering_seq = fresh.get(r.message_id)!;
}

interface TracedFanout {
  message: Pick<MessageRow, 'id' | 'tenant_id' | 'trace_context'>;
  deliveries: number;
}

/** A `hookline.fanout` span per traced message, in its emit's trace (messages.trace_context). */
function traceFanouts(
  tracing: Tracing,
  fanouts: readonly TracedFanout[],
  startMs: number,
  onEmit: boolean,
): void {
  const endMs = Date.now();
  for (const { message, deliveries } of fanouts) {
    tracing.record({
      name: 'hookline.fanout',
      parent: message.trace_context,
      startMs,
      endMs,
      attributes: {
        'hookline.tenant_id': message.tenant_id,
        'hookline.message_id': message.id,
        'hookline.deliveries': deliveries,
        'hookline.fanout.on_emit': onEmit,
      },
      error: false,
    });
  }
}

function newDelivery(
  message: Pick<MessageRow, 'id' | 'tenant_id' | 'event_type' | 'ordering_key'>,
  endpointId: string,
  orderingSeq: number | null,
  now: number,
): NewDelivery {
  return {
    id: newId('delivery', now),
    message_id: message.id,
    endpoint_id: endpointId,
    tenant_id: message.tenant_id,
    event_type: message.event_type,
    next_attempt_at: now,
    replay_of: null,
    first_headers: null,
    ordering_key: message.ordering_key,
    ordering_seq: orderingSeq,
  };
}

/**
 * At most this many active endpoints for a tenant's messages to be fanned out by their emit; a tenant
 * with more is left to the workers' chunked fan-out.
 */
export const EMIT_FANOUT_ENDPOINTS = 32;
/**
 * At most this many deliveries made by one group of emits, the rest of the group being left to the
 * workers: one worker fan-out chunk of the store that fans out on emit (SQLite's), which an emit may
 * already have to wait for. So fanning out at emit adds at most a fraction of a millisecond to a
 * group's transaction, whatever the number of endpoints (docs/contract.md §4.2: the answer's latency
 * must not grow with them).
 */
export const EMIT_FANOUT_BUDGET = 64;

/**
 * Writes a group of new messages, and where the store fans out on emit (Capabilities.fanOutOnEmit:
 * SQLite) fans out in the same transaction those whose tenant has few endpoints (docs/architecture.md,
 * "Fan-out"). Bounded by EMIT_FANOUT_ENDPOINTS and EMIT_FANOUT_BUDGET, so an emit's transaction stays
 * short whatever the subscriptions. Elsewhere every message is left to the workers, and this is one
 * statement, the messages' insert, which the emitter runs without a transaction around it
 * (events/emit.ts, isOneInsert).
 */
export async function insertAndFanOut(
  tx: Queryable,
  messages: MessageRow[],
  now: number,
  tracing: Tracing,
): Promise<{ workForWorkers: boolean }> {
  if (messages.length === 0) return { workForWorkers: false };
  const startMs = tracing.enabled ? Date.now() : 0;
  const matched = tx.capabilities.fanOutOnEmit
    ? await matchOnEmit(tx, messages)
    : new Map<number, string[]>();
  for (const i of matched.keys()) messages[i]!.awaits_fanout = false;
  const seqs = await insertMessages(tx, messages);
  const rows: NewDelivery[] = [];
  for (const [i, endpointIds] of matched) {
    for (const endpointId of endpointIds) rows.push(newDelivery(messages[i]!, endpointId, seqs[i]!, now));
  }
  await insertDeliveries(tx, rows, now);
  if (tracing.enabled && matched.size > 0) {
    const traced: TracedFanout[] = [];
    for (const [i, endpointIds] of matched) {
      const message = messages[i]!;
      if (message.trace_context !== null) traced.push({ message, deliveries: endpointIds.length });
    }
    traceFanouts(tracing, traced, startMs, true);
  }
  // Deliveries to attempt, or messages left to fan out: otherwise (no endpoint matched) nothing for
  // the workers to wake up for.
  return { workForWorkers: rows.length > 0 || matched.size < messages.length };
}

/** The messages (by index) fanned out with their emit, and the endpoints each goes to. */
async function matchOnEmit(tx: Queryable, messages: readonly MessageRow[]): Promise<Map<number, string[]>> {
  const matched = new Map<number, string[]>();
  const endpointsOf = new Map<string, Awaited<ReturnType<typeof listActiveEndpoints>> | null>();
  // Keys whose earlier messages the workers fan out: the later ones of this group follow them there.
  const deferredKeys = new Set<string>();
  const clearKeys = new Set<string>();
  let budget = EMIT_FANOUT_BUDGET;
  for (const [i, message] of messages.entries()) {
    let endpoints = endpointsOf.get(message.tenant_id);
    if (endpoints === undefined) {
      const page = await listActiveEndpoints(tx, message.tenant_id, '', EMIT_FANOUT_ENDPOINTS + 1);
      endpoints = page.length > EMIT_FANOUT_ENDPOINTS ? null : page;
      endpointsOf.set(message.tenant_id, endpoints);
    }
    if (endpoints === null) continue;
    const line = message.ordering_key === null ? null : `${message.tenant_id}\u0000${message.ordering_key}`;
    if (line !== null && deferredKeys.has(line)) continue;
    if (line !== null && !clearKeys.has(line)) {
      if (await keyAwaitsFanout(tx, message.tenant_id, message.ordering_key!)) {
        deferredKeys.add(line);
        continue;
      }
      clearKeys.add(line);
    }
    const to = endpoints.filter((e) => matchesEventFilter(filtersOf(e), message.event_type)).map((e) => e.id);
    if (to.length > budget) {
      if (line !== null) deferredKeys.add(line);
      continue;
    }
    budget -= to.length;
    matched.set(i, to);
  }
  return matched;
}
