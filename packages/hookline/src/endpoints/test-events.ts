// POST /v1/webhooks/:id/test (docs/contract.md §4.1): one delivery of a catalogue example to one
// endpoint, so a tenant can check its receiver's verification. It is an ordinary message and delivery
// (same queue, signing, headers, rate limit and retries), except that the message is written already
// fanned out with its one delivery, so it never reaches another endpoint, and that it is not
// dead-lettered when its attempts run out (docs/operators.md, "Test events").
import { CATALOGUE, matchesEventFilter, unknownEventTypeMessage } from '../catalogue/index.js';
import type { Context } from '../context.js';
import { HooklineError, notFound } from '../errors.js';
import { messageAad } from '../engine/sealing.js';
import { messageBody } from '../engine/validate-event.js';
import { isId, newId } from '../ids.js';
import { insertDeliveries } from '../store/deliveries.js';
import { lockQueues } from '../store/endpoint-queues.js';
import { getEndpoint, lockEndpoint } from '../store/endpoints.js';
import { insertTestMessage } from '../store/messages.js';

const endpointDeleted = () =>
  new HooklineError(
    'endpoint_deleted',
    'this endpoint is deleted; restore it before sending it a test event',
  );

/** The type to send: the one asked for, if the endpoint subscribes to it; else its first in catalogue order. */
function testType(filters: readonly string[], asked: string | undefined): string {
  if (asked !== undefined) {
    if (!CATALOGUE.some((e) => e.name === asked)) {
      throw new HooklineError('unknown_event_type', unknownEventTypeMessage(asked));
    }
    if (!matchesEventFilter(filters, asked)) {
      throw new HooklineError(
        'unknown_event_type',
        `type "${asked}" is not among this endpoint's events (${filters.join(', ')}); ` +
          'a test event is one the endpoint subscribes to',
      );
    }
    return asked;
  }
  // Every filter names at least one catalogue event, so some entry always matches.
  return CATALOGUE.find((e) => matchesEventFilter(filters, e.name))!.name;
}

export async function sendTestEvent(
  ctx: Context,
  tenantId: string,
  endpointId: string,
  asked: string | undefined,
): Promise<{ id: string }> {
  if (!isId('endpoint', endpointId)) throw notFound('webhook endpoint');
  const endpoint = await getEndpoint(ctx.db, tenantId, endpointId);
  if (!endpoint) throw notFound('webhook endpoint');
  if (endpoint.status === 'deleted') throw endpointDeleted();
  const type = testType(JSON.parse(endpoint.events) as string[], asked);
  const now = ctx.clock();
  const id = newId('message', now);
  const data = CATALOGUE.find((e) => e.name === type)!.example;
  const payload = ctx.envelope.seal(messageBody(type, data), messageAad(id));
  await ctx.db.transaction(async (tx) => {
    // The queue row, then the endpoint's: the lock order (store/endpoint-queues.ts). Under the lock a
    // concurrent DELETE either went first (refused here) or waits and then cancels this delivery too.
    await lockQueues(tx, [endpointId]);
    const current = await lockEndpoint(tx, tenantId, endpointId);
    if (!current || current.status === 'deleted') throw endpointDeleted();
    await insertTestMessage(tx, { id, tenant_id: tenantId, event_type: type, payload, created_at: now });
    await insertDeliveries(
      tx,
      [
        {
          id: newId('delivery', now),
          message_id: id,
          endpoint_id: endpointId,
          tenant_id: tenantId,
          event_type: type,
          next_attempt_at: now,
          replay_of: null,
          first_headers: null,
          ordering_key: null,
          ordering_seq: null,
        },
      ],
      now,
    );
  });
  ctx.signal.notify('claim');
  return { id };
}
