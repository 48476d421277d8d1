// Dead letters for operators: list (metadata only), inspect (decrypted), replay one (many: a job,
// admin/replay-jobs.ts). A replay is a new delivery of the same message (same hook-id, same bytes) to
// the same endpoint, signed with the endpoint's current secret; the record remembers it, and its
// outcome shows on the record.
import type { Context } from '../context.js';
import type { Envelope } from '../crypto/envelope.js';
import { openOrderingKey, openOriginal } from '../engine/sealing.js';
import { deadLetterAnswerAad, showLastError } from '../engine/last-error.js';
import { HooklineError, notFound } from '../errors.js';
import { isId, newId } from '../ids.js';
import { checkCursor, isoTime, toPage, type Page } from '../pagination.js';
import {
  getDeadLetter,
  listDeadLetters,
  markReplayed,
  type DeadLetterRow,
  type DeadLetterSummary,
} from '../store/dead-letters.js';
import { getDelivery, insertDeliveries } from '../store/deliveries.js';
import type { Queryable } from '../store/db.js';
import { lockQueues } from '../store/endpoint-queues.js';
import { getEndpointById } from '../store/endpoints.js';
import { nextOrderingSeqs } from '../store/messages.js';
import { audit, type Actor } from '../engine/audit.js';

/** The record as operators see it; the subscriber's last answer is opened for them (engine/last-error.ts). */
export function deadLetterView(envelope: Envelope, row: DeadLetterSummary) {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    endpoint_id: row.endpoint_id,
    event_type: row.event_type,
    hook_id: row.message_id,
    attempts: Number(row.attempts),
    last_error: showLastError(envelope, row.last_error, row.last_response, deadLetterAnswerAad(row.id)),
    died_at: isoTime(row.died_at),
    replayed_at: isoTime(row.replayed_at),
    /** Status of the latest replay's delivery: held, pending, delivering, succeeded, dead or cancelled. */
    replay_status: row.replay_status,
    // Stored as a keyed hash; operators read the key itself, opened (docs/security.md, "What is stored").
    ordering_key: openOrderingKey(envelope, row.message_id, row.ordering_key_sealed),
  };
}

export type DeadLetterView = ReturnType<typeof deadLetterView>;

export async function listDeadLetterViews(
  ctx: Context,
  filter: { tenantId?: string | null; endpointId?: string | null },
  limit: number,
  cursor: string | null,
): Promise<Page<DeadLetterView>> {
  const rows = await listDeadLetters(ctx.db, filter, limit + 1, checkCursor(cursor, 'deadLetter'));
  return toPage(rows, limit, (row) => deadLetterView(ctx.envelope, row));
}

/** One dead letter decrypted; the look is recorded in the read's transaction, before anything is returned. */
export async function inspectDeadLetter(ctx: Context, id: string, actor: Actor) {
  return ctx.db.transaction(async (tx) => {
    const row = isId('deadLetter', id) ? await getDeadLetter(tx, id) : undefined;
    if (!row) throw notFound('dead letter');
    const original = openOriginal(ctx.envelope, row.id, row.original);
    await audit(tx, actor, 'dead_letter.inspect', row.id, {}, ctx.clock());
    return { ...deadLetterView(ctx.envelope, row), body: original.body, headers: original.headers };
  });
}

type ReplayRefusal = 'endpoint_deleted' | 'endpoint_disabled' | 'replay_in_progress';

/** Queues a replay inside `tx`; answers why not when it cannot. */
async function queueReplay(
  ctx: Context,
  tx: Queryable,
  row: DeadLetterRow,
  now: number,
): Promise<{ deliveryId: string } | { refused: ReplayRefusal }> {
  // The queue row before the dead letter's: the lock order of every transaction (store/endpoint-queues.ts).
  await lockQueues(tx, [row.endpoint_id]);
  const endpoint = await getEndpointById(tx, row.endpoint_id);
  if (!endpoint || endpoint.status === 'deleted') return { refused: 'endpoint_deleted' };
  if (endpoint.status === 'disabled') return { refused: 'endpoint_disabled' };
  if (row.replay_delivery_id) {
    const previous = await getDelivery(tx, row.replay_delivery_id);
    if (previous && ['held', 'pending', 'delivering'].includes(previous.status)) {
      return { refused: 'replay_in_progress' };
    }
  }
  const deliveryId = newId('delivery', now);
  // Compare-and-set on the previous replay: of two concurrent replays of one record, one wins.
  if (!(await markReplayed(tx, row.id, row.replay_delivery_id, deliveryId, now))) {
    return { refused: 'replay_in_progress' };
  }
  await insertDeliveries(
    tx,
    [
      {
        id: deliveryId,
        message_id: row.message_id,
        endpoint_id: row.endpoint_id,
        tenant_id: row.tenant_id,
        event_type: row.event_type,
        next_attempt_at: now,
        replay_of: row.id,
        first_headers: null,
        ordering_key: row.ordering_key,
        // The back of its key's line (docs/contract.md §6).
        ordering_seq: row.ordering_key === null ? null : (await nextOrderingSeqs(tx, 1))[0]!,
      },
    ],
    now,
  );
  return { deliveryId };
}

const REFUSAL_MESSAGES: Record<ReplayRefusal, [HooklineError['code'], string]> = {
  endpoint_deleted: ['endpoint_deleted', 'the endpoint is deleted; restore it before replaying to it'],
  endpoint_disabled: [
    'endpoint_disabled',
    'the endpoint is disabled; re-enable it (PATCH status active) first',
  ],
  replay_in_progress: ['replay_in_progress', 'a replay of this dead letter is already under way'],
};

export async function replayDeadLetter(ctx: Context, id: string, actor: Actor) {
  const result = await ctx.db.transaction(async (tx) => {
    const row = isId('deadLetter', id) ? await getDeadLetter(tx, id) : undefined;
    if (!row) throw notFound('dead letter');
    const now = ctx.clock();
    const queued = await queueReplay(ctx, tx, row, now);
    if ('refused' in queued) {
      const [code, message] = REFUSAL_MESSAGES[queued.refused];
      throw new HooklineError(code, message);
    }
    await audit(tx, actor, 'dead_letter.replay', id, { delivery_id: queued.deliveryId }, now);
    return { id, replay_delivery_id: queued.deliveryId, status: 'queued' as const };
  });
  ctx.signal.notify('claim');
  return result;
}
