// Attempt outcomes are written in batches: one transaction for many results is what lets delivery
// throughput exceed the database's commit rate. Every write is fenced by the attempt number.
import type { Context } from '../context.js';
import { insertDeadLetter, recordReplayDeath } from '../store/dead-letters.js';
import { markDead, markForRetry, markSucceeded, type ClaimedDelivery } from '../store/deliveries.js';
import { BUCKET_MS, addStats, type StatsIncrement } from '../store/delivery-stats.js';
import { disableEndpoint, markEndpointFailing, markEndpointsHealthy } from '../store/endpoints.js';
import { afterFailure, afterSuccess } from './circuit-breaker.js';

/** An endpoint with no successful delivery for this long is disabled. */
export const DISABLE_FAILING_ENDPOINT_AFTER_MS = 5 * 24 * 60 * 60 * 1000;
const FLUSH_SIZE = 128;
const FLUSH_DELAY_MS = 5;
const RETRY_FLUSH_MS = 1000;

interface Failure {
  delivery: ClaimedDelivery;
  status: number | null;
  error: string;
  /** The subscriber answered 410 Gone: it asks not to be called again. */
  gone: boolean;
}

export type Outcome =
  | { kind: 'succeeded'; delivery: ClaimedDelivery; status: number }
  | ({ kind: 'retry'; nextAttemptAt: number; firstHeaders: string | null } & Failure)
  | ({ kind: 'dead'; deadLetter: { id: string; original: Buffer } | null } & Failure);

export class OutcomeWriter {
  private queue: Outcome[] = [];
  /** Resolves each queued outcome's `push` promise once it is written (or abandoned at close). */
  private readonly settled = new Map<Outcome, () => void>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly ctx: Context,
    private readonly onWritten: (outcomes: readonly Outcome[]) => void = () => {},
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
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.flush();
    }, ms);
  }

  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    this.flushing = this.write(batch)
      .then(() => {
        this.settle(batch);
        this.onWritten(batch);
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
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      await this.flush();
      if (this.queue.length > 0) await new Promise((r) => setTimeout(r, 100));
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    // Whatever could not be written is abandoned to the leases; nobody may wait on it forever.
    this.settle([...this.settled.keys()]);
  }

  private async write(batch: readonly Outcome[]): Promise<void> {
    const now = this.ctx.clock();
    const bucket = Math.floor(now / BUCKET_MS) * BUCKET_MS;
    const stats = new Map<string, StatsIncrement>();
    const count = (d: ClaimedDelivery, field: 'succeeded' | 'failed' | 'dead') => {
      const s = stats.get(d.endpoint_id) ?? {
        bucket,
        endpoint_id: d.endpoint_id,
        tenant_id: d.tenant_id,
        succeeded: 0,
        failed: 0,
        dead: 0,
      };
      s[field] += 1;
      stats.set(d.endpoint_id, s);
    };
    const written: Outcome[] = [];
    await this.ctx.db.transaction(async (tx) => {
      // The store may run this again after a lost deadlock: start the tallies afresh each time.
      stats.clear();
      written.length = 0;
      // One by one, so that only the rows the fence let through are counted: a stale success (its
      // lease expired and the delivery was attempted again, or it was cancelled meanwhile) is not a
      // second success in the stats, just as a stale failure is not a failure.
      const successes: Outcome[] = [];
      for (const o of batch) {
        if (o.kind !== 'succeeded') continue;
        const item = { id: o.delivery.id, attempt: o.delivery.attempts, status: o.status };
        if ((await markSucceeded(tx, [item], now)) === 0) continue;
        count(o.delivery, 'succeeded');
        successes.push(o);
      }
      written.push(...successes);
      const healthy = [...new Set(successes.map((o) => o.delivery.endpoint_id))];
      await markEndpointsHealthy(tx, healthy);
      for (const id of await afterSuccess(tx, healthy, now)) {
        this.ctx.logger.info({ endpoint_id: id }, 'endpoint answered again; circuit closed');
      }

      for (const o of batch) {
        if (o.kind === 'succeeded') continue;
        const fence = { id: o.delivery.id, attempt: o.delivery.attempts, status: o.status, error: o.error };
        if (o.kind === 'retry') {
          if (
            !(await markForRetry(
              tx,
              { ...fence, nextAttemptAt: o.nextAttemptAt, firstHeaders: o.firstHeaders },
              now,
            ))
          )
            continue;
          count(o.delivery, 'failed');
        } else {
          if (!(await markDead(tx, fence, now))) continue;
          if (o.delivery.replay_of) {
            await recordReplayDeath(tx, o.delivery.replay_of, o.delivery.attempts, o.error, now);
          } else if (o.deadLetter) {
            await insertDeadLetter(tx, {
              id: o.deadLetter.id,
              delivery_id: o.delivery.id,
              tenant_id: o.delivery.tenant_id,
              endpoint_id: o.delivery.endpoint_id,
              message_id: o.delivery.message_id,
              event_type: o.delivery.event_type,
              attempts: o.delivery.attempts,
              last_error: o.error,
              original: o.deadLetter.original,
              died_at: now,
              replayed_at: null,
              replay_delivery_id: null,
            });
          }
          count(o.delivery, 'dead');
        }
        written.push(o);
        const endpointId = o.delivery.endpoint_id;
        if (o.gone && (await disableEndpoint(tx, endpointId, 'the endpoint answered 410 Gone', now))) {
          this.ctx.logger.warn({ endpoint_id: endpointId }, 'endpoint answered 410 Gone; disabled');
        } else if (
          !o.gone &&
          (await markEndpointFailing(tx, endpointId, now, DISABLE_FAILING_ENDPOINT_AFTER_MS))
        ) {
          this.ctx.logger.warn({ endpoint_id: endpointId }, 'endpoint failing for days; disabled');
        }
        // Parks what waits for a disabled endpoint (this failure's retry included), or opens the
        // circuit of one that has been failing for long.
        if ((await afterFailure(tx, endpointId, now, this.ctx.config.circuitBreakAfterMs)) === 'opened') {
          this.ctx.logger.warn({ endpoint_id: endpointId }, 'endpoint keeps failing; circuit opened');
        }
      }
      await addStats(tx, stats.values());
    });
    for (const o of written) {
      this.ctx.metrics.deliveries.inc({ outcome: o.kind === 'retry' ? 'failed' : o.kind });
    }
  }
}
