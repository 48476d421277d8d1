// The delivery worker (docs/architecture.md, "The worker"): fans out new messages, claims due
// deliveries in batches into a local buffer, runs the attempts concurrently and hands outcomes to the
// group-committing writer. Per-endpoint limits live in the database (endpoint queues), so they hold
// across any number of workers against one database (PostgreSQL); expired leases are reaped.
import type { Context } from '../context.js';
import { claimOptions } from '../engine/claims.js';
import { fanOutBatch } from '../engine/fanout.js';
import { claimsWithWrite, judgeAttempt, writeOutcomes, type Outcome } from '../engine/outcomes.js';
import { messageAad, openHeaders, signingSecrets } from '../engine/sealing.js';
import type { ClaimedAttempt } from '../store/attempts.js';
import {
  claimDeliveries,
  reapExpiredLeases,
  reconcileInFlight,
  reconcileNextDue,
  releaseDeliveries,
  sweepDeletedEndpoints,
} from '../store/deliveries.js';
import { nextReadyAt, vacuumQueues } from '../store/endpoint-queues.js';
import { OutcomeWriter } from './outcome-writer.js';
import { RefusalWarnings } from './refusal-warnings.js';
import { ReplayRunner } from './replay-runner.js';
import { notSent, Sender, type SendResult, type Sending } from './sender.js';
import { SenderThread } from './sender-thread.js';
import { Wake } from './wake.js';
import { deliveryHeaders, requestHeaders } from './wire.js';

export interface WorkerOptions {
  /** Longest sleep when idle; notifications usually wake the worker sooner. */
  pollIntervalMs?: number;
  reapIntervalMs?: number;
  random?: () => number;
  /**
   * Send attempts from a thread of their own (delivery/sender-thread.ts), as `hookline worker` does.
   * Off, they go from this thread: `serve`'s delivery thread, and tests that run the TypeScript
   * sources (which cannot start that thread).
   */
  senderThread?: boolean;
}

interface InFlight {
  delivery: ClaimedAttempt;
  done: Promise<void>;
}

/** A claimed attempt not yet started, with what the attempts of its claim share. */
interface Buffered {
  delivery: ClaimedAttempt;
  opened: Opened;
}

export class DeliveryWorker {
  private running = false;
  /** Set when stop() interrupts what is still in flight: those attempts are released, not judged. */
  private interrupting = false;
  private readonly inFlight = new Map<string, InFlight>();
  /** Claimed, not yet started: the prefetch buffer. */
  private buffer: Buffered[] = [];
  private readonly fanoutWake = new Wake();
  private readonly claimWake = new Wake();
  private readonly reaperWake = new Wake();
  private readonly sender: Sending;
  private readonly outcomes: OutcomeWriter;
  private readonly refusals: RefusalWarnings;
  /** Bulk-replay jobs (docs/contract.md §4.3) are run by the workers, one batch at a time. */
  private readonly replays: ReplayRunner;
  private loops: Promise<unknown> | null = null;
  private unsubscribe: (() => void) | null = null;
  private readonly options: Required<WorkerOptions>;
  /** Attempts in flight plus the buffer: what a claim may bring this worker up to. */
  private readonly capacity: number;
  /** A claim runs when at least this much of the capacity is free, not for every freed slot. */
  private readonly lowWater: number;
  /** Room a write of outcomes under way is claiming (record): writes run one at a time. */
  private reserved = 0;
  /** Claimed by a write of outcomes that ended after stop() began: never started, released by stop(). */
  private readonly claimedWhileStopping: ClaimedAttempt[] = [];

  private readonly ctx: Context;

  constructor(ctx: Context, options: WorkerOptions = {}) {
    // The worker's own transitions commit without waiting for the disk; what a server crash undoes of
    // them is redone (store/db.ts, forWorkers).
    this.ctx = { ...ctx, db: ctx.db.forWorkers() };
    this.options = {
      pollIntervalMs: options.pollIntervalMs ?? 1000,
      reapIntervalMs: options.reapIntervalMs ?? 5000,
      random: options.random ?? Math.random,
      senderThread: options.senderThread ?? false,
    };
    const concurrency = ctx.config.workerConcurrency;
    this.capacity = concurrency + Math.ceil(concurrency / 4);
    this.lowWater = Math.max(1, Math.floor(this.capacity / 8));
    const senderOptions = {
      timeoutMs: ctx.config.deliveryTimeoutMs,
      allowPrivateNetworks: ctx.config.allowPrivateNetworks,
      connectionsPerOrigin: ctx.config.endpointConcurrency,
      extraCaCertificates: ctx.config.extraCaCertificates,
      egressProxyUrl: ctx.config.egressProxyUrl,
    };
    this.sender = this.options.senderThread
      ? new SenderThread(senderOptions, (reason) =>
          ctx.logger.error({ reason }, 'the sender thread stopped; its attempts failed and will be retried'),
        )
      : new Sender(senderOptions);
    // Written outcomes free room in the endpoints' limits: the claimer may find work again.
    this.outcomes = new OutcomeWriter(this.ctx, (batch) => this.record(batch), this.claimWake);
    this.refusals = new RefusalWarnings(this.ctx);
    this.replays = new ReplayRunner(this.ctx, {
      idleMs: this.options.pollIntervalMs,
      onQueued: () => {
        this.claimWake.fire();
        this.ctx.signal.notify('claim');
      },
    });
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    const senderStarted = this.sender.start();
    this.unsubscribe = await this.ctx.signal.onWake((kind) => {
      if (kind !== 'claim') this.fanoutWake.fire();
      if (kind !== 'fanout') this.claimWake.fire();
      // The replay runner asks the database for jobs each time it wakes: only when one was created.
      if (kind === 'replay') this.replays.wake();
    });
    await senderStarted;
    this.loops = Promise.all([this.fanoutLoop(), this.claimLoop(), this.reaperLoop(), this.replays.run()]);
  }

  /** Stops claiming, lets attempts in flight finish until `graceMs`, then interrupts and releases the rest. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.unsubscribe?.();
    this.fanoutWake.fire();
    this.claimWake.fire();
    this.reaperWake.fire();
    this.replays.stop();
    await this.loops;
    const unstarted = this.buffer.map((b) => b.delivery);
    this.buffer = [];
    const drained = Promise.all([...this.inFlight.values()].map((f) => f.done));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([drained, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    const interrupted = [...this.inFlight.values()].map((f) => f.delivery);
    this.interrupting = true;
    this.sender.abortAll();
    await this.outcomes.close();
    // A flush under way when stopping began may still have claimed: that is released too.
    const release = [...unstarted, ...this.claimedWhileStopping.splice(0), ...interrupted];
    if (release.length > 0) {
      await this.ctx.db
        .transaction((tx) =>
          releaseDeliveries(
            tx,
            release.map((d) => ({ id: d.id, attempt: d.attempts, endpoint_id: d.endpoint_id })),
            this.ctx.clock(),
            this.ctx.config.endpointConcurrency,
          ),
        )
        .catch((err: unknown) =>
          this.ctx.logger.warn({ err }, 'could not release claims; their leases will expire'),
        );
    }
    await this.sender.close();
  }

  private async fanoutLoop(): Promise<void> {
    while (this.running) {
      try {
        const result = await fanOutBatch(this.ctx);
        if (result.deliveries > 0) {
          this.claimWake.fire();
          if (!this.claimsAll(result.deliveries)) this.ctx.signal.notify('claim');
        }
        // On SQLite a batch runs without ever leaving the event loop (the driver is synchronous): the
        // next one waits a turn, so the attempts already claimed get their sockets served meanwhile.
        if (result.messages > 0) {
          await new Promise((resolve) => setImmediate(resolve));
          continue;
        }
      } catch (err) {
        this.ctx.logger.error({ err }, 'fan-out failed; retrying');
      }
      await this.fanoutWake.sleep(this.options.pollIntervalMs);
    }
  }

  private async reaperLoop(): Promise<void> {
    const { db, config } = this.ctx;
    while (this.running) {
      try {
        const now = this.ctx.clock();
        const released = await db.transaction((tx) => reapExpiredLeases(tx, now, config.endpointConcurrency));
        if (released > 0) {
          this.ctx.logger.warn({ released }, 'released deliveries whose worker lease expired');
          this.claimWake.fire();
        }
        if ((await db.transaction((tx) => reconcileInFlight(tx))) > 0) this.claimWake.fire();
        const repaired = await db.transaction((tx) => reconcileNextDue(tx));
        if (repaired > 0) {
          this.ctx.logger.warn({ queues: repaired }, 'restored the next due time of endpoint queues');
          this.claimWake.fire();
        }
        await db.transaction((tx) => sweepDeletedEndpoints(tx, now));
        await vacuumQueues(db);
      } catch (err) {
        this.ctx.logger.error({ err }, 'lease reaper failed');
      }
      await this.reaperWake.sleep(this.options.reapIntervalMs);
    }
  }

  /**
   * Keeps the buffer filled: claims when a good part of the capacity is free (or the worker is idle),
   * as much as is free, and otherwise sleeps until woken (outcomes written, new work notified) or the
   * next endpoint becomes ready.
   */
  private async claimLoop(): Promise<void> {
    const spacingMs = this.ctx.db.capabilities.claimSpacingMs;
    let lastClaimAt = -Infinity;
    while (this.running) {
      // Attempts under way: the next claim gathers the deliveries made meanwhile (Capabilities).
      const early = lastClaimAt + spacingMs - performance.now();
      if (early > 0 && this.held() > 0) {
        await new Promise((resolve) => setTimeout(resolve, early));
        if (!this.running) break;
      }
      const held = this.held();
      const room = this.capacity - held;
      let claimed = 0;
      let paced = false;
      if (room >= this.lowWater || (held === 0 && room > 0)) {
        try {
          lastClaimAt = performance.now();
          const batch = await claimDeliveries(this.ctx.db, claimOptions(this.ctx, this.ctx.clock(), room));
          claimed = batch.length;
          paced = batch.some((d) => d.send_at != null);
          if (claimed > 0) {
            this.fill(batch);
            this.dispatch();
            if (claimed === room) continue;
          }
        } catch (err) {
          this.ctx.logger.error({ err }, 'claiming deliveries failed; retrying');
        }
      }
      // A rate-limited endpoint's next slot comes sooner than any outcome: wait for it, not for a wake.
      await this.claimWake.sleep(
        room < this.lowWater || (claimed > 0 && !paced)
          ? this.options.pollIntervalMs
          : await this.idleDelay(),
      );
    }
  }

  /**
   * Until the next endpoint becomes ready, or the poll interval, whichever is sooner. An endpoint ready
   * already, after a claim that found nothing, is held by another worker's claim or flush: that one
   * takes what is there, and a retry every millisecond only queued behind it (CONTENDED_RETRY_MS).
   */
  private async idleDelay(): Promise<number> {
    try {
      const next = await nextReadyAt(this.ctx.db);
      if (next === null) return this.options.pollIntervalMs;
      const wait = next - this.ctx.clock();
      return Math.min(this.options.pollIntervalMs, wait > 0 ? wait : CONTENDED_RETRY_MS);
    } catch {
      return this.options.pollIntervalMs;
    }
  }

  /**
   * Writes a batch of outcomes. Where the store claims in the same transaction (claimsWithWrite), the
   * room the batch frees is reserved meanwhile, so that the claim loop does not take it too, and what
   * the write claimed joins the buffer.
   */
  private async record(batch: readonly Outcome[]): Promise<void> {
    this.reserved = claimsWithWrite(this.ctx.db, batch) ? this.roomAfter(batch.length) : 0;
    let claimed: ClaimedAttempt[] = [];
    try {
      ({ claimed } = await writeOutcomes(this.ctx, batch, this.reserved));
    } finally {
      this.reserved = 0;
    }
    this.take(claimed);
  }

  /** The room `finishing` outcomes leave, if a claim would run for it (see claimLoop); else 0. */
  private roomAfter(finishing: number): number {
    if (!this.running) return 0;
    const room = this.capacity - this.held() + finishing;
    return room < this.lowWater ? 0 : room;
  }

  /**
   * Whether this worker's next claim has room for `made` new deliveries. Then the other workers are not
   * woken for them: an endpoint's limits hold across workers, so what this claim leaves they could not
   * take either, and a worker woken for work already taken makes an empty claim.
   */
  private claimsAll(made: number): boolean {
    const room = this.capacity - this.held();
    return this.running && room >= this.lowWater && room >= made;
  }

  /** Attempts in flight, in the buffer and being claimed by a write: what counts against the capacity. */
  private held(): number {
    return this.inFlight.size + this.buffer.length + this.reserved;
  }

  private take(claimed: readonly ClaimedAttempt[]): void {
    if (claimed.length === 0) return;
    if (!this.running) {
      this.claimedWhileStopping.push(...claimed);
      return;
    }
    this.fill(claimed);
    this.dispatch();
  }

  /**
   * Adds a claimed batch to the buffer. Its attempts open each payload and secret once between them,
   * however many dispatches start them: at full concurrency most start one at a time, as others finish.
   */
  private fill(batch: readonly ClaimedAttempt[]): void {
    const opened = new Opened(this.ctx);
    for (const delivery of batch) this.buffer.push({ delivery, opened });
  }

  /** Starts buffered attempts while slots are free. */
  private dispatch(): void {
    const free = this.ctx.config.workerConcurrency - this.inFlight.size;
    if (free <= 0 || this.buffer.length === 0) return;
    const starting = this.buffer.splice(0, free);
    for (const { delivery, opened } of starting) {
      const entry: InFlight = { delivery, done: Promise.resolve() };
      this.inFlight.set(delivery.id, entry);
      entry.done = this.attempt(delivery, opened)
        .catch((err: unknown) => this.ctx.logger.error({ err, delivery_id: delivery.id }, 'attempt crashed'))
        .finally(() => this.finish(delivery));
    }
  }

  private finish(delivery: ClaimedAttempt): void {
    this.inFlight.delete(delivery.id);
    if (this.buffer.length > 0) this.dispatch();
    else if (this.capacity - this.inFlight.size >= this.lowWater) this.claimWake.fire();
  }

  private async attempt(delivery: ClaimedAttempt, opened: Opened): Promise<void> {
    // A child logger costs more than the attempt's bookkeeping: made only when something is logged.
    const log = () =>
      this.ctx.logger.child({
        delivery_id: delivery.id,
        endpoint_id: delivery.endpoint_id,
        hook_id: delivery.message_id,
        attempt: delivery.attempts,
      });
    const maxAttempts = 1 + this.ctx.config.maxRetries;
    // A rate-limited endpoint's attempts go at their slots in its pace (docs/architecture.md, "Rate limits").
    if (delivery.send_at != null) {
      const wait = Number(delivery.send_at) - this.ctx.clock();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    const started = this.ctx.clock();
    const body = opened.body(delivery);
    const secrets = opened.secrets(delivery, started);
    const custom = opened.headers(delivery);
    if (body === null || secrets === null || custom === null) {
      // Counted as a failed attempt, so it ends (dead, without a record of a body it cannot read)
      // instead of being claimed again every lease period. The usual cause is a wrong
      // HOOKLINE_ENCRYPTION_KEY (or a missing HOOKLINE_PREVIOUS_ENCRYPTION_KEYS after a rotation).
      const error =
        body === null
          ? 'stored message cannot be decrypted'
          : secrets === null
            ? 'signing secret cannot be decrypted'
            : 'custom headers cannot be decrypted';
      log().error(`attempt impossible: ${error}`);
      const outcome = judgeAttempt(
        this.ctx,
        { delivery, headers: {}, body },
        notSent(error),
        this.options.random,
      );
      if (this.ctx.tracing.enabled) traceAttempt(this.ctx, outcome, 0);
      await this.outcomes.push(outcome);
      return;
    }
    const headers = deliveryHeaders({
      hookId: delivery.message_id,
      eventType: delivery.event_type,
      body,
      secrets,
      nowMs: started,
    });
    // Attempts past the limit come from leases that expired (a worker died mid-attempt): give up
    // rather than exceed the promised number of attempts.
    const result: SendResult =
      delivery.attempts > maxAttempts
        ? notSent('worker lease expired during the last attempt')
        : await this.sender.send({ url: delivery.url, headers: requestHeaders(headers, custom), body });
    if (this.interrupting) return; // shutting down: the claim is released, not judged
    this.ctx.metrics.attemptSeconds.observe(result.durationMs / 1000);
    this.refusals.observe(result, delivery.endpoint_id, log);
    const outcome = judgeAttempt(this.ctx, { delivery, headers, body }, result, this.options.random);
    if (this.ctx.tracing.enabled) traceAttempt(this.ctx, outcome, result.durationMs);
    await this.outcomes.push(outcome);
    if (this.ctx.logger.isLevelEnabled('debug')) {
      log().debug(
        { status: result.status, ok: result.ok, ms: Math.round(result.durationMs) },
        'attempt finished',
      );
    }
  }
}

/** A ready endpoint another worker holds: asked again after this long, unless woken sooner. */
const CONTENDED_RETRY_MS = 10;

const TRACED_OUTCOME = { succeeded: 'succeeded', retry: 'failed', dead: 'dead' } as const;

/**
 * The attempt's span, in the trace of the emit that created its message (messages.trace_context), made
 * when the outcome is known, with the times the attempt took: so a retry hours later, or on another
 * worker, joins the same trace (docs/operators.md, "Tracing"). No URL, header or body goes in it.
 */
function traceAttempt(ctx: Context, outcome: Outcome, durationMs: number): void {
  const { delivery } = outcome;
  const endMs = Date.now();
  ctx.tracing.record({
    name: 'hookline.attempt',
    parent: delivery.trace_context,
    startMs: endMs - durationMs,
    endMs,
    attributes: {
      'hookline.tenant_id': delivery.tenant_id,
      'hookline.endpoint_id': delivery.endpoint_id,
      'hookline.message_id': delivery.message_id,
      'hookline.delivery_id': delivery.id,
      'hookline.event_type': delivery.event_type,
      'hookline.attempt': delivery.attempts,
      'hookline.outcome': TRACED_OUTCOME[outcome.kind],
      ...(outcome.status === null ? {} : { 'http.response.status_code': outcome.status }),
    },
    error: outcome.kind !== 'succeeded',
  });
}

/** Decrypts each message payload and endpoint secret once for the attempts of one claimed batch. */
class Opened {
  private readonly bodies = new Map<string, string | null>();
  private readonly secretsByEndpoint = new Map<string, string[] | null>();
  private readonly headersByEndpoint = new Map<string, Record<string, string> | null>();

  constructor(private readonly ctx: Context) {}

  body(d: ClaimedAttempt): string | null {
    // One unreadable message (wrong HOOKLINE_ENCRYPTION_KEY, damaged row) fails its own deliveries;
    // it must not hold up the rest of the batch.
    return this.once(this.bodies, d.message_id, 'message_id', 'stored message', () =>
      this.ctx.envelope.openText(d.payload, messageAad(d.message_id)),
    );
  }

  secrets(d: ClaimedAttempt, now: number): string[] | null {
    return this.once(this.secretsByEndpoint, d.endpoint_id, 'endpoint_id', 'signing secret', () =>
      signingSecrets(this.ctx.envelope, { ...d, id: d.endpoint_id }, now),
    );
  }

  headers(d: ClaimedAttempt): Record<string, string> | null {
    return this.once(this.headersByEndpoint, d.endpoint_id, 'endpoint_id', 'custom headers', () =>
      openHeaders(this.ctx.envelope, d.endpoint_id, d.endpoint_headers),
    );
  }

  /** Opens a value once per batch; a value that cannot be decrypted is logged once and null. */
  private once<T>(
    cache: Map<string, T | null>,
    id: string,
    idField: 'message_id' | 'endpoint_id',
    what: string,
    open: () => T,
  ): T | null {
    let value = cache.get(id);
    if (value === undefined) {
      try {
        value = open();
      } catch (err) {
        this.ctx.logger.error({ err, [idField]: id }, `${what} cannot be decrypted`);
        value = null;
      }
      cache.set(id, value);
    }
    return value;
  }
}
