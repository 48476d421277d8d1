// Dead letters for operators: list (metadata only), inspect (decrypted), replay one or many. A replay
// is a new delivery of the same message (same hook-id, same bytes) to the same endpoint, signed with
// the endpoint's current secret; the record remembers it, and its outcome shows on the record.
import type { Context } from '../context.js';
import { openOriginal } from '../delivery/dead-letter-codec.js';
import { HooklineError, notFound } from '../errors.js';
import { isId, newId } from '../ids.js';
import { checkCursor, isoTime, toPage, type Page } from '../pagination.js';
import {
  getDeadLetter,
  listDeadLetters,
  listReplayable,
  markReplayed,
  type DeadLetterFilter,
  type DeadLetterRow,
  type DeadLetterSummary,
} from '../store/dead-letters.js';
import { getDelivery, insertDeliveries } from '../store/deliveries.js';
import type { Queryable } from '../store/db.js';
import { getEndpointById } from '../store/endpoints.js';
import { nextOrderingSeq } from '../store/messages.js';
import { audit, updateAudit, type Actor } from './audit.js';

export function deadLetterView(row: DeadLetterSummary) {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    endpoint_id: row.endpoint_id,
    event_type: row.event_type,
    hook_id: row.message_id,
    attempts: Number(row.attempts),
    last_error: row.last_error,
    died_at: isoTime(row.died_at),
    replayed_at: isoTime(row.replayed_at),
    /** Status of the latest replay's delivery: held, pending, delivering, succeeded, dead or cancelled. */
    replay_status: row.replay_status,
    ordering_key: row.ordering_key,
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
  return toPage(rows, limit, deadLetterView);
}

/** One dead letter decrypted; the look is recorded in the read's transaction, before anything is returned. */
export async function inspectDeadLetter(ctx: Context, id: string, actor: Actor) {
  return ctx.db.transaction(async (tx) => {
    const row = isId('deadLetter', id) ? await getDeadLetter(tx, id) : undefined;
    if (!row) throw notFound('dead letter');
    const original = openOriginal(ctx.envelope, row.id, row.original);
    await audit(tx, actor, 'dead_letter.inspect', row.id, {}, ctx.clock());
    return { ...deadLetterView(row), body: original.body, headers: original.headers };
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
        ordering_seq: row.ordering_key === null ? null : await nextOrderingSeq(tx),
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
  ctx.signal.notify();
  return result;
}

export type BulkReplayFilter = DeadLetterFilter;

export interface BulkReplayResult {
  count: number;
  skipped: Record<ReplayRefusal, number>;
}

/**
 * Replays every dead letter matching the filter that is not already being replayed. Safe to call
 * twice: records with a replay under way are skipped, not queued again.
 */
export async function replayDeadLetters(
  ctx: Context,
  filter: BulkReplayFilter,
  actor: Actor,
  onProgress: (done: number) => void = () => {},
): Promise<BulkReplayResult> {
  let result: BulkReplayResult = {
    count: 0,
    skipped: { endpoint_deleted: 0, endpoint_disabled: 0, replay_in_progress: 0 },
  };
  // One entry for the whole replay, written with its first transaction and updated with each later one
  // (admin/audit.ts, updateAudit), so it shows exactly what has committed even if a batch fails.
  let auditId: string | null = null;
  const record = async (tx: Queryable, tally: BulkReplayResult, now: number): Promise<string> => {
    const details = { filter, ...tally };
    if (auditId === null) return audit(tx, actor, 'dead_letter.bulk_replay', null, details, now);
    await updateAudit(tx, auditId, details);
    return auditId;
  };
  let after: string | null = null;
  for (;;) {
    const batch: DeadLetterRow[] = await listReplayable(ctx.db, filter, 200, after);
    if (batch.length === 0) break;
    // The tally and the entry's id are taken only once the transaction commits: the store may run it again.
    const committed = await ctx.db.transaction(async (tx) => {
      const now = ctx.clock();
      const tally = { count: result.count, skipped: { ...result.skipped } };
      for (const row of batch) {
        const queued = await queueReplay(ctx, tx, row, now);
        if ('refused' in queued) tally.skipped[queued.refused] += 1;
        else tally.count += 1;
      }
      return { tally, auditId: await record(tx, tally, now) };
    });
    result = committed.tally;
    auditId = committed.auditId;
    after = batch[batch.length - 1]?.id ?? null;
    onProgress(result.count + Object.values(result.skipped).reduce((a, b) => a + b, 0));
    ctx.signal.notify();
  }
  // Nothing matched: the request is still recorded, with its empty result.
  if (auditId === null) await ctx.db.transaction((tx) => record(tx, result, ctx.clock()));
  return result;
}
