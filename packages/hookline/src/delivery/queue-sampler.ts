// Records the backlog once a minute so operators can see it over time, not just now.
import type { Context } from '../context.js';
import { countDeadLetters } from '../store/dead-letters.js';
import { queueTotals } from '../store/endpoint-queues.js';
import { BUCKET_MS } from '../store/delivery-stats.js';
import { recordQueueSample } from '../store/queue-samples.js';

export async function sampleQueue(ctx: Context): Promise<void> {
  const now = ctx.clock();
  const depth = await queueTotals(ctx.db, now);
  await recordQueueSample(ctx.db, {
    bucket: Math.floor(now / BUCKET_MS) * BUCKET_MS,
    ...depth,
    dead_letters: (await countDeadLetters(ctx.db)).stored,
  });
}

/** Samples now and then every `intervalMs` until stopped. */
export function startQueueSampler(ctx: Context, intervalMs = BUCKET_MS): () => void {
  const run = () =>
    void sampleQueue(ctx).catch((err: unknown) =>
      ctx.logger.warn({ err }, 'could not record a queue sample'),
    );
  run();
  const timer = setInterval(run, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
