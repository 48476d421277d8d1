// Keeps the database from growing without bound: finished deliveries, the messages no longer needed,
// old statistics and finished bulk-replay jobs go after HOOKLINE_RETENTION_DAYS. Any worker may run
// it; the deletes are idempotent, so several workers doing so at once only share the work.
import type { Context } from '../context.js';
import { recountDeadLetters } from '../store/dead-letters.js';
import {
  pruneFinishedDeliveries,
  pruneOrphanMessages,
  pruneReplayJobs,
  pruneSamples,
} from '../store/retention.js';

export interface PruneResult {
  deliveries: number;
  messages: number;
  samples: number;
  replayJobs: number;
}

export async function pruneOnce(ctx: Context): Promise<PruneResult> {
  const before = ctx.clock() - ctx.config.retentionDays * 86_400_000;
  const result: PruneResult = { deliveries: 0, messages: 0, samples: 0, replayJobs: 0 };
  for (let n = -1; n !== 0;) result.deliveries += n = await pruneFinishedDeliveries(ctx.db, before);
  for (let n = -1; n !== 0;) result.messages += n = await pruneOrphanMessages(ctx.db, before);
  result.samples = await pruneSamples(ctx.db, before);
  result.replayJobs = await pruneReplayJobs(ctx.db, before);
  // Not pruning: the dead-letter count is kept by the flushes that write them, and set right here
  // should an operator have deleted some by hand (store/dead-letters.ts, recountDeadLetters).
  await recountDeadLetters(ctx.db);
  return result;
}

/** Prunes now and then every `intervalMs` until stopped. */
export function startRetention(ctx: Context, intervalMs = 60 * 60 * 1000): () => void {
  const run = () =>
    void pruneOnce(ctx).then(
      (r) => {
        if (r.deliveries + r.messages + r.samples + r.replayJobs > 0)
          ctx.logger.info(r, 'pruned data past retention');
      },
      (err: unknown) => ctx.logger.warn({ err }, 'retention pruning failed; trying again later'),
    );
  const first = setTimeout(run, 30_000);
  const timer = setInterval(run, intervalMs);
  first.unref();
  timer.unref();
  return () => {
    clearTimeout(first);
    clearInterval(timer);
  };
}
