// Attempt outcomes are written in batches (group commit): one transaction of a handful of set-based
// statements records however many results finished together (docs/architecture.md, "Recording
// outcomes"). Every write is fenced by the attempt number.
import type { Context } from '../context.js';
import { insertDeadLetters, recordReplayDeaths, type DeadLetterRow } from '../store/dead-letters.js';
import {
  advanceLines,
  completeDeliveries,
  failDeliveries,
  flushClaims,
  recordSuccessesThenClaim,
  type ClaimOptions,
  type ClaimedAttempt,
} from '../store/deliveries.js';
import { BUCKET_MS, addStats, emptyStats, type StatsIncrement } from '../store/delivery-stats.js';
import { emptySettlement, lockQueues, settleQueues, type QueueSettlement } from '../store/endpoint-queues.js';
import { recordEndpointHealth } from '../engine/circuit-breaker.js';
import { deadLetterAnswerAad, deliveryAnswerAad, sealAnswer, splitError } from '../engine/last-error.js';

const FLUSH_SIZE = 256;
const FLUSH_DELAY_MS = 2;
const RETRY_FLUSH_MS = 1000;

/** How an attempt's answer bears on the endpoint's adaptive limit. */
export type LoadSignal = 'fast' | 'slow' | 'congested' | 'none';

interface Failure {
  delivery: ClaimedAttempt;
  status: number | null;
  error: string;
  /** The subscriber answered 410 Gone: it asks not to be called again. */
  gone: boolean;
  signal: LoadSignal;
  /** A 429/503 Retry-After: the whole endpoint waits until then. */
  pauseUntil: number | null;
}

export type Outcome =
  | { kind: 'succeeded'; delivery: ClaimedAttempt; status: number; signal: LoadSignal }
  | ({ kind: 'retry'; retryAt: number; firstHeaders: string | null } & Failure)
  | ({ kind: 'dead'; deadLetter: { id: string; original: Buffer } | null } & Failure);

/**
 * Who takes the work a flush's freed slots make room for, where the store claims it in the flush's
 * own transaction (recordSuccessesThenClaim): the worker.
 */
export interface FollowingClaim {
  /**
   * What to claim after writing `finishing` outcomes at `now`, or null for nothing (too little
   * room). The claim's time is the flush's: a keyed delivery the flush lets go is due then.
   */
  options(finishing: number, now: number): ClaimOptions | null;
  /** Once for each `options` that was not null: what was claimed (empty if nothing, or the write failed). */
  take(attempts: readonly ClaimedAttempt[]): void;
}

export class OutcomeWriter {
  private queue: Outcome[] = [];
  /** Resolves each queued outcome's `push` promise once it is written (or abandoned at close). */
  private readonly settled = new Map<Outcome, () => void>();
  /** Cancels the scheduled flush, if one is scheduled. */
  private timer: (() => void) | null = null;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly ctx: Context,
    private readonly onWritten: (outcomes: readonly Outcome[]) => void = () => {},
    private readonly following: FollowingClaim | null = null,
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

  private async write(batch: readonly Outcome[]): Promise<void> {
    const { config, logger } = this.ctx;
    // The usual flush: every attempt succeeded at an endpoint that was healthy. Nothing to restore,
    // no dead letters, no retries: the store records it in one statement (PostgreSQL).
    if (batch.every((o) => o.kind === 'succeeded' && o.delivery.endpoint_healthy)) {
      const now = this.ctx.clock();
      // Asked only where the store claims in the flush: the worker reserves that room meanwhile.
      const next =
        this.following && flushClaims(this.ctx.db) ? this.following.options(batch.length, now) : null;
      let claimed: ClaimedAttempt[] | null = null;
      try {
        const written = await recordSuccessesThenClaim(
          this.ctx.db,
          batch.map((o) => ({
            id: o.delivery.id,
            attempt: o.delivery.attempts,
            status: o.kind === 'succeeded' ? o.status : 0,
            endpoint_id: o.delivery.endpoint_id,
            tenant_id: o.delivery.tenant_id,
            fast: o.signal === 'fast',
            ordering_key: o.delivery.ordering_key,
          })),
          now,
          config.endpointConcurrency,
          next,
        );
        claimed = written.claimed;
        this.ctx.metrics.deliveries.inc({ outcome: 'succeeded' }, written.rows.length);
      } finally {
        if (next) this.following?.take(claimed ?? []);
      }
      return;
    }
    const byId = new Map(batch.map((o) => [o.delivery.id, o]));
    const successes = batch.filter((o) => o.kind === 'succeeded');
    const failures = batch.filter((o) => o.kind !== 'succeeded');
    // Only failures cost a seal: the subscriber's answer, never in clear (delivery/last-error.ts).
    const { envelope } = this.ctx;
    const errors = new Map(failures.map((o) => [o, splitError(o.error)]));
    const written = await this.ctx.db.transaction(async (tx) => {
      const now = this.ctx.clock();
      await lockQueues(
        tx,
        batch.map((o) => o.delivery.endpoint_id),
      );
      const completed = await completeDeliveries(
        tx,
        successes.map((o) => ({ id: o.delivery.id, attempt: o.delivery.attempts, status: o.status })),
        now,
      );
      const failed = await failDeliveries(
        tx,
        failures.map((o) => ({
          id: o.delivery.id,
          attempt: o.delivery.attempts,
          status: o.status,
          error: errors.get(o)!.reason,
          response: sealAnswer(envelope, errors.get(o)!.answer, deliveryAnswerAad(o.delivery.id)),
          retryAt: o.kind === 'retry' ? o.retryAt : null,
          firstHeaders: o.kind === 'retry' ? o.firstHeaders : null,
        })),
        now,
      );
      // Only what the fence let through counts: a stale outcome (its lease expired and the delivery
      // was attempted again, or it was cancelled meanwhile) is neither a success nor a failure.
      const recorded = [...completed, ...failed].map((r) => byId.get(r.id)!);
      // A keyed delivery that succeeded or died lets the next of its line go; a retry keeps its place.
      await advanceLines(tx, [...completed, ...failed.filter((r) => r.status === 'dead')], now);
      const dead = recorded.filter((o) => o.kind === 'dead');
      await recordReplayDeaths(
        tx,
        dead
          .filter((o) => o.delivery.replay_of)
          .map((o) => ({
            id: o.delivery.replay_of!,
            attempts: o.delivery.attempts,
            lastError: errors.get(o)!.reason,
            lastResponse: sealAnswer(
              envelope,
              errors.get(o)!.answer,
              deadLetterAnswerAad(o.delivery.replay_of!),
            ),
          })),
        now,
      );
      await insertDeadLetters(
        tx,
        dead.flatMap((o): DeadLetterRow[] =>
          o.delivery.replay_of || !o.deadLetter
            ? []
            : [
                {
                  id: o.deadLetter.id,
                  delivery_id: o.delivery.id,
                  tenant_id: o.delivery.tenant_id,
                  endpoint_id: o.delivery.endpoint_id,
                  message_id: o.delivery.message_id,
                  event_type: o.delivery.event_type,
                  ordering_key: o.delivery.ordering_key,
                  attempts: o.delivery.attempts,
                  last_error: errors.get(o)!.reason,
                  last_response: sealAnswer(
                    envelope,
                    errors.get(o)!.answer,
                    deadLetterAnswerAad(o.deadLetter.id),
                  ),
                  original: o.deadLetter.original,
                  died_at: now,
                  replayed_at: null,
                  replay_delivery_id: null,
                },
              ],
        ),
      );
      await addStats(tx, tally(recorded, now));
      await settleQueues(tx, settlements(recorded), config.endpointConcurrency, now);
      const health = await recordEndpointHealth(
        tx,
        {
          succeeded: recorded.filter((o) => o.kind === 'succeeded').map((o) => o.delivery.endpoint_id),
          // Endpoints healthy when claimed have nothing to restore: two statements saved per flush.
          restore: recorded
            .filter((o) => o.kind === 'succeeded' && !o.delivery.endpoint_healthy)
            .map((o) => o.delivery.endpoint_id),
          failing: recorded
            .filter((o) => o.kind !== 'succeeded' && !o.gone)
            .map((o) => o.delivery.endpoint_id),
          gone: recorded.filter((o) => o.kind !== 'succeeded' && o.gone).map((o) => o.delivery.endpoint_id),
        },
        now,
        config.circuitBreakAfterMs,
      );
      return { recorded, health };
    });
    const { recorded, health } = written;
    for (const id of health.closed)
      logger.info({ endpoint_id: id }, 'endpoint answered again; circuit closed');
    for (const o of health.opened)
      logger.warn(
        { endpoint_id: o.id, until: new Date(o.until).toISOString() },
        'endpoint keeps failing; circuit open',
      );
    for (const id of health.disabledGone)
      logger.warn({ endpoint_id: id }, 'endpoint answered 410 Gone; disabled');
    for (const id of health.disabledFailing)
      logger.warn({ endpoint_id: id }, 'endpoint failing for days; disabled');
    for (const o of recorded) {
      this.ctx.metrics.deliveries.inc({ outcome: o.kind === 'retry' ? 'failed' : o.kind });
    }
  }
}

function tally(recorded: readonly Outcome[], now: number): StatsIncrement[] {
  const bucket = Math.floor(now / BUCKET_MS) * BUCKET_MS;
  const stats = new Map<string, StatsIncrement>();
  for (const o of recorded) {
    const d = o.delivery;
    let s = stats.get(d.endpoint_id);
    if (!s) {
      s = emptyStats(bucket, d.endpoint_id, d.tenant_id);
      stats.set(d.endpoint_id, s);
    }
    s[o.kind === 'retry' ? 'failed' : o.kind] += 1;
  }
  return [...stats.values()];
}

function settlements(recorded: readonly Outcome[]): QueueSettlement[] {
  const byEndpoint = new Map<string, QueueSettlement>();
  for (const o of recorded) {
    const id = o.delivery.endpoint_id;
    let s = byEndpoint.get(id);
    if (!s) {
      s = emptySettlement(id);
      byEndpoint.set(id, s);
    }
    s.finished += 1;
    if (o.kind === 'retry') {
      s.requeued += 1;
      s.requeuedDue = s.requeuedDue === null ? o.retryAt : Math.min(s.requeuedDue, o.retryAt);
    }
    if (o.signal === 'fast') s.fast += 1;
    if (o.signal === 'congested') s.congested = true;
    if (o.kind !== 'succeeded' && o.pauseUntil !== null) {
      s.pauseUntil = Math.max(s.pauseUntil ?? 0, o.pauseUntil);
    }
  }
  return [...byEndpoint.values()];
}
