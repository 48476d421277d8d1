// The delivery worker: fans out new messages, claims due deliveries in batches, runs the attempts
// concurrently with a per-endpoint cap, and hands outcomes to the batched writer. Any number of these
// can run against one database (PostgreSQL): claims never overlap, and expired leases are reaped.
import type { Context } from '../context.js';
import { signingSecrets } from '../endpoints/signing-secrets.js';
import { messageAad } from '../events/emit.js';
import { newId } from '../ids.js';
import {
  claimDue,
  nextDueAt,
  releaseClaims,
  releaseExpiredLeases,
  type ClaimedDelivery,
} from '../store/deliveries.js';
import { getEndpointsForDelivery, type EndpointForDelivery } from '../store/endpoints.js';
import { getPayloads } from '../store/messages.js';
import { retryDelay } from './backoff.js';
import { deadLetterAad } from './dead-letter-codec.js';
import { probeOpenCircuits } from './circuit-breaker.js';
import { fanOutBatch } from './fanout.js';
import { OutcomeWriter, type Outcome } from './outcome-writer.js';
import { Sender, type SendResult } from './sender.js';
import { Wake } from './wake.js';
import { deliveryHeaders } from './wire.js';

export interface WorkerOptions {
  /** Longest sleep when idle; notifications usually wake the worker sooner. */
  pollIntervalMs?: number;
  reapIntervalMs?: number;
  claimBatch?: number;
  random?: () => number;
}

/**
 * How long a claim is protected: the attempt's time-out plus slack for recording the outcome, at most
 * 30 s of it (DESIGN §6). A lease that runs out early costs at worst a duplicate attempt (fencing keeps
 * the outcomes straight), so the slack shrinks with short time-outs and crashed work returns sooner.
 */
export function leaseMs(deliveryTimeoutMs: number): number {
  return deliveryTimeoutMs + Math.min(30_000, Math.max(5_000, deliveryTimeoutMs));
}

interface InFlight {
  delivery: ClaimedDelivery;
  abort: AbortController;
  done: Promise<void>;
}

export class DeliveryWorker {
  private running = false;
  private readonly inFlight = new Map<string, InFlight>();
  private readonly perEndpoint = new Map<string, number>();
  private readonly fanoutWake = new Wake();
  private readonly deliveryWake = new Wake();
  private readonly reaperWake = new Wake();
  private readonly sender: Sender;
  private readonly outcomes: OutcomeWriter;
  private loops: Promise<unknown> | null = null;
  private unsubscribe: (() => void) | null = null;
  /** The delivery loop is asleep waiting for a slot to free up. */
  private waitingForSlot = false;
  private readonly options: Required<WorkerOptions>;

  constructor(
    private readonly ctx: Context,
    options: WorkerOptions = {},
  ) {
    this.options = {
      pollIntervalMs: options.pollIntervalMs ?? 1000,
      reapIntervalMs: options.reapIntervalMs ?? 5000,
      claimBatch: options.claimBatch ?? 64,
      random: options.random ?? Math.random,
    };
    this.sender = new Sender({
      timeoutMs: ctx.config.deliveryTimeoutMs,
      allowPrivateNetworks: ctx.config.allowPrivateNetworks,
    });
    this.outcomes = new OutcomeWriter(ctx);
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.unsubscribe = await this.ctx.signal.onWake(() => {
      this.fanoutWake.fire();
      this.deliveryWake.fire();
    });
    this.loops = Promise.all([this.fanoutLoop(), this.deliveryLoop(), this.reaperLoop()]);
  }

  /** Stops claiming, lets attempts in flight finish until `graceMs`, then interrupts and releases the rest. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.unsubscribe?.();
    this.fanoutWake.fire();
    this.deliveryWake.fire();
    this.reaperWake.fire();
    await this.loops;
    const drained = Promise.all([...this.inFlight.values()].map((f) => f.done));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([drained, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
    clearTimeout(timer);
    const interrupted = [...this.inFlight.values()];
    for (const f of interrupted) f.abort.abort();
    await this.outcomes.close();
    if (interrupted.length > 0) {
      await releaseClaims(
        this.ctx.db,
        interrupted.map((f) => ({ id: f.delivery.id, attempt: f.delivery.attempts })),
        this.ctx.clock(),
      ).catch((err: unknown) =>
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
          this.deliveryWake.fire();
          this.ctx.signal.notify();
        }
        if (result.messages > 0) continue;
      } catch (err) {
        this.ctx.logger.error({ err }, 'fan-out failed; retrying');
      }
      await this.fanoutWake.sleep(this.options.pollIntervalMs);
    }
  }

  private async reaperLoop(): Promise<void> {
    while (this.running) {
      try {
        const released = await releaseExpiredLeases(this.ctx.db, this.ctx.clock());
        if (released > 0) {
          this.ctx.logger.warn({ released }, 'released deliveries whose worker lease expired');
          this.deliveryWake.fire();
        }
        const { endpointConcurrency, deliveryTimeoutMs } = this.ctx.config;
        if ((await probeOpenCircuits(this.ctx, endpointConcurrency, leaseMs(deliveryTimeoutMs))) > 0) {
          this.deliveryWake.fire();
        }
      } catch (err) {
        this.ctx.logger.error({ err }, 'lease reaper failed');
      }
      await this.reaperWake.sleep(this.options.reapIntervalMs);
    }
  }

  private saturatedEndpoints(): string[] {
    const cap = this.ctx.config.endpointConcurrency;
    return [...this.perEndpoint].filter(([, n]) => n >= cap).map(([id]) => id);
  }

  private async deliveryLoop(): Promise<void> {
    const { workerConcurrency, endpointConcurrency, deliveryTimeoutMs } = this.ctx.config;
    while (this.running) {
      const free = workerConcurrency - this.inFlight.size;
      const saturated = this.saturatedEndpoints();
      if (free > 0) {
        try {
          const now = this.ctx.clock();
          const claimed = await claimDue(this.ctx.db, {
            now,
            leaseUntil: now + leaseMs(deliveryTimeoutMs),
            limit: Math.min(free, this.options.claimBatch),
            perEndpoint: endpointConcurrency,
            excludeEndpoints: saturated,
            inFlight: Object.fromEntries(this.perEndpoint),
          });
          if (claimed.length > 0) {
            await this.begin(claimed);
            continue;
          }
        } catch (err) {
          this.ctx.logger.error({ err }, 'claiming deliveries failed; retrying');
        }
      }
      this.waitingForSlot = free <= 0 || saturated.length > 0;
      await this.deliveryWake.sleep(free > 0 ? await this.idleDelay(saturated) : this.options.pollIntervalMs);
      this.waitingForSlot = false;
    }
  }

  /**
   * Sleeps until the next scheduled retry is due, or the poll interval, whichever is sooner. Work of
   * saturated endpoints does not count: a freed slot wakes the loop (finish), not a timer.
   */
  private async idleDelay(saturated: readonly string[]): Promise<number> {
    try {
      const next = await nextDueAt(this.ctx.db, saturated);
      if (next === null) return this.options.pollIntervalMs;
      return Math.max(1, Math.min(this.options.pollIntervalMs, next - this.ctx.clock()));
    } catch {
      return this.options.pollIntervalMs;
    }
  }

  private async begin(claimed: ClaimedDelivery[]): Promise<void> {
    const endpoints = new Map<string, EndpointForDelivery>();
    const bodies = new Map<string, string>();
    try {
      for (const e of await getEndpointsForDelivery(this.ctx.db, [
        ...new Set(claimed.map((d) => d.endpoint_id)),
      ])) {
        endpoints.set(e.id, e);
      }
      for (const m of await getPayloads(this.ctx.db, [...new Set(claimed.map((d) => d.message_id))])) {
        try {
          bodies.set(m.id, this.ctx.envelope.openText(m.payload, messageAad(m.id)));
        } catch (err) {
          // One unreadable message (wrong HOOKLINE_ENCRYPTION_KEY, damaged row) fails its own
          // deliveries below; it must not hold up the rest of the batch.
          this.ctx.logger.error({ err, message_id: m.id }, 'stored message cannot be decrypted');
        }
      }
    } catch (err) {
      // The claims stay leased; the reaper hands them out again when the leases expire.
      this.ctx.logger.error({ err }, 'could not load claimed deliveries');
      return;
    }
    for (const delivery of claimed) {
      const abort = new AbortController();
      const entry: InFlight = { delivery, abort, done: Promise.resolve() };
      this.inFlight.set(delivery.id, entry);
      this.perEndpoint.set(delivery.endpoint_id, (this.perEndpoint.get(delivery.endpoint_id) ?? 0) + 1);
      entry.done = this.attempt(
        delivery,
        endpoints.get(delivery.endpoint_id),
        bodies.get(delivery.message_id),
        abort,
      )
        .catch((err: unknown) => this.ctx.logger.error({ err, delivery_id: delivery.id }, 'attempt crashed'))
        .finally(() => this.finish(delivery));
    }
  }

  private finish(delivery: ClaimedDelivery): void {
    const { workerConcurrency, endpointConcurrency } = this.ctx.config;
    const wasFull = this.inFlight.size >= workerConcurrency;
    this.inFlight.delete(delivery.id);
    const before = this.perEndpoint.get(delivery.endpoint_id) ?? 1;
    const left = before - 1;
    if (left > 0) this.perEndpoint.set(delivery.endpoint_id, left);
    else this.perEndpoint.delete(delivery.endpoint_id);
    // A slot the loop may be waiting for came free. Also fired when the loop is not asleep yet (it may
    // be mid-claim, having seen the endpoint saturated): Wake remembers it, so the slot is not missed
    // until the next poll.
    if (this.waitingForSlot || wasFull || before >= endpointConcurrency) this.deliveryWake.fire();
  }

  private async attempt(
    delivery: ClaimedDelivery,
    endpoint: EndpointForDelivery | undefined,
    body: string | undefined,
    abort: AbortController,
  ): Promise<void> {
    const log = this.ctx.logger.child({
      delivery_id: delivery.id,
      endpoint_id: delivery.endpoint_id,
      hook_id: delivery.message_id,
      attempt: delivery.attempts,
    });
    const maxAttempts = 1 + this.ctx.config.maxRetries;
    const now = this.ctx.clock();
    let secrets: string[] | null = null;
    try {
      secrets = endpoint ? signingSecrets(this.ctx.envelope, endpoint, now) : null;
    } catch (err) {
      log.error({ err }, 'signing secret cannot be decrypted');
    }
    if (!endpoint || body === undefined || secrets === null) {
      // Counted as a failed attempt, so it ends (dead, without a record of a body it cannot read)
      // instead of being claimed again every lease period. The usual cause is a wrong
      // HOOKLINE_ENCRYPTION_KEY (or a missing HOOKLINE_PREVIOUS_ENCRYPTION_KEYS after a rotation).
      const error = !endpoint
        ? 'endpoint not found'
        : body === undefined
          ? 'stored message cannot be decrypted'
          : 'signing secret cannot be decrypted';
      log.error(`attempt impossible: ${error}`);
      const failure = { ok: false, status: null, error, retryAfterMs: null, durationMs: 0 };
      await this.outcomes.push(this.judge(delivery, failure, {}, body ?? null, maxAttempts, now));
      return;
    }
    const headers = deliveryHeaders({
      hookId: delivery.message_id,
      eventType: delivery.event_type,
      body,
      secrets,
      nowMs: now,
    });
    // Attempts past the limit come from leases that expired (a worker died mid-attempt): give up
    // rather than exceed the promised number of attempts.
    const result: SendResult =
      delivery.attempts > maxAttempts
        ? {
            ok: false,
            status: null,
            error: 'worker lease expired during the last attempt',
            retryAfterMs: null,
            durationMs: 0,
          }
        : await this.sender.send({ url: endpoint.url, headers, body }, abort.signal);
    if (abort.signal.aborted) return; // shutting down: the claim is released, not judged
    this.ctx.metrics.attemptSeconds.observe(result.durationMs / 1000);
    await this.outcomes.push(this.judge(delivery, result, headers, body, maxAttempts, now));
    log.debug(
      { status: result.status, ok: result.ok, ms: Math.round(result.durationMs) },
      'attempt finished',
    );
  }

  private judge(
    delivery: ClaimedDelivery,
    result: SendResult,
    headers: Record<string, string>,
    body: string | null,
    maxAttempts: number,
    now: number,
  ): Outcome {
    if (result.ok) return { kind: 'succeeded', delivery, status: result.status ?? 200 };
    const failure = {
      delivery,
      status: result.status,
      error: result.error ?? 'failed',
      gone: result.status === 410,
    };
    if (delivery.attempts >= maxAttempts) {
      if (delivery.replay_of || body === null) return { kind: 'dead', ...failure, deadLetter: null };
      const id = newId('deadLetter', now);
      const firstHeaders = delivery.first_headers
        ? (JSON.parse(delivery.first_headers) as Record<string, string>)
        : headers;
      const original = this.ctx.envelope.seal(
        JSON.stringify({ body, headers: firstHeaders }),
        deadLetterAad(id),
      );
      return { kind: 'dead', ...failure, deadLetter: { id, original } };
    }
    const delay = retryDelay(
      delivery.attempts,
      { baseMs: this.ctx.config.retryBaseMs, maxMs: this.ctx.config.retryMaxMs },
      result.retryAfterMs,
      this.options.random,
    );
    return {
      kind: 'retry',
      ...failure,
      nextAttemptAt: now + delay,
      firstHeaders: delivery.first_headers || body === null ? null : JSON.stringify(headers),
    };
  }
}
