// The worker's group commit of attempt outcomes (docs/architecture.md, "Recording outcomes"): what
// finishes together is written together, by the function its owner gives (the worker's, which writes
// through engine/outcomes.ts). This file decides only when: batches grow with load, an idle worker
// pays no timer delay, and a batch that could not be written is kept and tried again.
import type { Context } from '../context.js';
import { writeOutcomes, type Outcome } from '../engine/outcomes.js';
import type { Wake } from './wake.js';

const FLUSH_SIZE = 256;
const FLUSH_DELAY_MS = 2;
const RETRY_FLUSH_MS = 1000;

export class OutcomeWriter {
  private queue: Outcome[] = [];
  /** Resolves each queued outcome's `push` promise once it is written (or abandoned at close). */
  private readonly settled = new Map<Outcome, () => void>();
  /** Cancels the scheduled flush, if one is scheduled. */
  private timer: (() => void) | null = null;
  private flushing: Promise<void> | null = null;

  /**
   * `write` writes one batch; `written`, if given, is woken after each batch is written and its
   * outcomes settled (the worker's claimer: the batch freed room in the endpoints' limits).
   */
  constructor(
    private readonly ctx: Context,
    private readonly write: (batch: readonly Outcome[]) => Promise<unknown> = (batch) =>
      writeOutcomes(ctx, batch, 0),
    private readonly written: Wake | null = null,
  ) {}

  get pending(): number {
    return this.queue.length;
  }

  /**
   * Queues an outcome; the promise resolves once it is in the database. The worker holds the attempt's
   * slot until then, so a crash can repeat at most its concurrency's worth of attempts, and a database
   * outage stops it from claiming more work than it can record.
   */
  push(outcome: Outcome): Promise<void> {
    const written = new Promise<void>((resolve) => this.settled.set(outcome, resolve));
    this.queue.push(outcome);
    // Group commit: with no write under way, write on the next tick (gathering what finishes together);
    // during a write, outcomes wait and go together in the next one. Batches grow with load, and an
    // idle worker pays no timer delay.
    if (this.queue.length >= FLUSH_SIZE) void this.flush();
    else this.schedule(this.flushing ? FLUSH_DELAY_MS : 0);
    return written;
  }

  private settle(outcomes: readonly Outcome[]): void {
    for (const o of outcomes) {
      this.settled.get(o)?.();
      this.settled.delete(o);
    }
  }

  private schedule(ms: number): void {
    if (this.timer) return;
    const run = () => {
      this.timer = null;
      void this.flush();
    };
    // setTimeout(0) waits a millisecond; an immediate still gathers what finished in this turn of the
    // event loop, without making a lone outcome (the head of an ordering key's line) wait.
    if (ms === 0) {
      const immediate = setImmediate(run);
      this.timer = () => clearImmediate(immediate);
    } else {
      const timeout = setTimeout(run, ms);
      this.timer = () => clearTimeout(timeout);
    }
  }

  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    this.flushing = this.write(batch)
      .then(() => {
        this.settle(batch);
        this.written?.fire();
      })
      .catch((err: unknown) => {
        // Keep them and try again: until written, the leases protect the deliveries, and if this
        // process dies the leases expire and the attempts are simply made again (at-least-once).
        this.ctx.logger.error({ err, outcomes: batch.length }, 'could not record attempt outcomes; retrying');
        this.queue = [...batch, ...this.queue];
        this.schedule(RETRY_FLUSH_MS);
      })
      .finally(() => {
        this.flushing = null;
        if (this.queue.length > 0 && !this.timer) this.schedule(0);
      });
    await this.flushing;
  }

  /** Writes everything queued; gives up after `deadlineMs` (the leases then cover what is left). */
  async close(deadlineMs = 5000): Promise<void> {
    const until = Date.now() + deadlineMs;
    // A write already under way counts too: the queue is empty while it runs, and returning then
    // would let the caller close the database under it (and its retry timer outlive the writer).
    while ((this.queue.length > 0 || this.flushing) && Date.now() < until) {
      this.timer?.();
      this.timer = null;
      await this.flush();
      if (this.queue.length > 0) await new Promise((r) => setTimeout(r, 100));
    }
    this.timer?.();
    this.timer = null;
    // Whatever could not be written is abandoned to the leases; nobody may wait on it forever.
    this.settle([...this.settled.keys()]);
  }
}
