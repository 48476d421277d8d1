// Bulk replay as a job (docs/contract.md §4.3, docs/operators.md "Bulk replay"): the request records
// the job and answers at once; workers run it in small batches (engine/replay-batch.ts).
import type { Context } from '../context.js';
import { audit, type Actor } from '../engine/audit.js';
import { notFound } from '../errors.js';
import { isId, newId } from '../ids.js';
import { isoTime } from '../pagination.js';
import { measureFilter, type DeadLetterFilter } from '../store/dead-letters.js';
import { getReplayJob, insertReplayJob, type ReplayJobRow } from '../store/replay-jobs.js';

export function replayJobView(row: ReplayJobRow) {
  return {
    id: row.id,
    status: row.status,
    count: row.count,
    replayed: row.replayed,
    skipped: row.skipped,
    failed: row.failed,
    error: row.error,
    created_at: isoTime(row.created_at),
    finished_at: isoTime(row.finished_at),
  };
}

export type ReplayJobView = ReturnType<typeof replayJobView>;

/**
 * Records a job over the dead letters matching `filter` now (later ones are not part of it) and
 * answers its id and how many it covers; with none, the job is done at once.
 */
export async function startReplayJob(
  ctx: Context,
  filter: DeadLetterFilter,
  actor: Actor,
): Promise<{ id: string; count: number }> {
  const now = ctx.clock();
  const id = newId('replay', now);
  const result = await ctx.db.transaction(async (tx) => {
    const { count, last } = await measureFilter(tx, filter);
    await insertReplayJob(tx, {
      id,
      status: count === 0 ? 'done' : 'running',
      tenant_id: filter.tenantId ?? null,
      endpoint_id: filter.endpointId ?? null,
      since: filter.since ?? null,
      until: filter.until ?? null,
      last_id: last,
      count,
      created_at: now,
    });
    // The filter as the API takes it: audit details are snake_case like every field hookline shows.
    const asRequested = {
      tenant_id: filter.tenantId ?? null,
      endpoint_id: filter.endpointId ?? null,
      since: isoTime(filter.since ?? null),
      until: isoTime(filter.until ?? null),
    };
    await audit(tx, actor, 'dead_letter.bulk_replay', id, { filter: asRequested, count }, now);
    return { id, count };
  });
  ctx.signal.notify('replay');
  return result;
}

export async function getReplayJobView(ctx: Context, id: string): Promise<ReplayJobView> {
  const row = isId('replay', id) ? await getReplayJob(ctx.db, id) : undefined;
  if (!row) throw notFound('replay job');
  return replayJobView(row);
}
