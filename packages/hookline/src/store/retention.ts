// Deleting what is finished and old, in bounded batches so no single statement holds locks for long.
// Dead letters are kept (an operator deletes nothing by accident), and so are the messages they
// refer to, because a replay sends the stored message.
import { idAt } from '../ids.js';
import type { Queryable } from './db.js';

const BATCH = 1000;

// Ids sort by creation time (ids.ts), so "created before the cut-off" is a primary-key range: no index
// on a time column has to be kept up to date by every delivery for the sake of an hourly prune.

export async function pruneFinishedDeliveries(q: Queryable, before: number): Promise<number> {
  return q.run(
    `DELETE FROM deliveries WHERE id IN (
       SELECT id FROM deliveries
       WHERE id < $2 AND status IN ('succeeded', 'cancelled', 'dead') AND completed_at < $1
       LIMIT ${BATCH})`,
    [before, idAt('delivery', before)],
  );
}

export async function pruneOrphanMessages(q: Queryable, before: number): Promise<number> {
  return q.run(
    `DELETE FROM messages WHERE id IN (
       SELECT m.id FROM messages m
       WHERE m.id < $2 AND m.created_at < $1
         AND NOT EXISTS (SELECT 1 FROM fanout_queue f WHERE f.message_id = m.id)
         AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.message_id = m.id)
         AND NOT EXISTS (SELECT 1 FROM dead_letters dl WHERE dl.message_id = m.id)
       LIMIT ${BATCH})`,
    [before, idAt('message', before)],
  );
}

export async function pruneSamples(q: Queryable, before: number): Promise<number> {
  return (
    (await q.run('DELETE FROM delivery_stats WHERE bucket < $1', [before])) +
    (await q.run('DELETE FROM queue_samples WHERE bucket < $1', [before]))
  );
}

/** Bulk-replay jobs that ended before the cut-off: their counts were for watching them run. */
export async function pruneReplayJobs(q: Queryable, before: number): Promise<number> {
  return q.run(`DELETE FROM replay_jobs WHERE status <> 'running' AND finished_at < $1`, [before]);
}
