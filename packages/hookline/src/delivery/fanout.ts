// Fan-out: each message becomes one delivery per active endpoint of its tenant whose filter matches,
// as the endpoints are at fan-out time. One transaction per batch, so a message is fanned out exactly
// once even if the worker dies half-way.
import { matchesEventFilter } from '../catalogue/index.js';
import type { Context } from '../context.js';
import { newId } from '../ids.js';
import { insertDeliveries, type NewDelivery } from '../store/deliveries.js';
import { listActiveEndpoints } from '../store/endpoints.js';
import { claimForFanout, markFannedOut } from '../store/messages.js';

export const FANOUT_BATCH = 200;

export interface FanoutResult {
  messages: number;
  deliveries: number;
}

export async function fanOutBatch(ctx: Context, limit = FANOUT_BATCH): Promise<FanoutResult> {
  return ctx.db.transaction(async (tx) => {
    const messages = await claimForFanout(tx, limit);
    if (messages.length === 0) return { messages: 0, deliveries: 0 };
    const now = ctx.clock();
    const endpointsByTenant = new Map<string, { id: string; filters: string[]; circuitOpen: boolean }[]>();
    const rows: NewDelivery[] = [];
    for (const message of messages) {
      let endpoints = endpointsByTenant.get(message.tenant_id);
      if (!endpoints) {
        const active = await listActiveEndpoints(tx, message.tenant_id);
        endpoints = active.map((e) => ({
          id: e.id,
          filters: JSON.parse(e.events) as string[],
          circuitOpen: e.circuit_open_until !== null,
        }));
        endpointsByTenant.set(message.tenant_id, endpoints);
      }
      for (const endpoint of endpoints) {
        if (!matchesEventFilter(endpoint.filters, message.event_type)) continue;
        rows.push({
          id: newId('delivery', now),
          message_id: message.id,
          endpoint_id: endpoint.id,
          tenant_id: message.tenant_id,
          event_type: message.event_type,
          next_attempt_at: now,
          replay_of: null,
          first_headers: null,
          // Behind an open circuit a new delivery waits with the endpoint's backlog.
          status: endpoint.circuitOpen ? 'parked' : 'pending',
        });
      }
    }
    await insertDeliveries(tx, rows, now);
    await markFannedOut(
      tx,
      messages.map((m) => m.id),
      now,
    );
    return { messages: messages.length, deliveries: rows.length };
  });
}
