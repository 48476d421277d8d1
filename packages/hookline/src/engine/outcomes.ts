// What an attempt's result means, and how a batch of them is written (docs/architecture.md,
// "Recording outcomes"). judgeAttempt classifies one result: a success, a retry at its backoff, or a
// death with the dead letter's sealed original. writeOutcomes writes a batch in one transaction of a
// handful of set-based statements, every write fenced by the attempt number; the worker's group
// commit (delivery/outcome-writer.ts) decides when.
import type { Context } from '../context.js';
import { newId } from '../ids.js';
import { refusalOf } from '../net/index.js';
import type { ClaimedAttempt } from '../store/attempts.js';
import { insertDeadLetters, recordReplayDeaths, type DeadLetterRow } from '../store/dead-letters.js';
import type { Db } from '../store/db.js';
import {
  advanceLines,
  completeDeliveries,
  failDeliveries,
  claimsWithSuccesses,
  recordSuccessesThenClaim,
} from '../store/deliveries.js';
import { BUCKET_MS, addStats, emptyStats, type StatsIncrement } from '../store/delivery-stats.js';
import {
  addAnswer,
  emptySettlement,
  lockQueues,
  settleQueues,
  type QueueSettlement,
} from '../store/endpoint-queues.js';
import { RETRY_AFTER_CAP_MS, retryDelay } from './backoff.js';
import { claimOptions } from './claims.js';
import { recordEndpointHealth, type HealthChanges, type HealthInput } from './circuit-breaker.js';
import {
  deadLetterAnswerAad,
  deliveryAnswerAad,
  sealAnswer,
  splitError,
  type SplitError,
} from './last-error.js';
import { sealOriginal } from './sealing.js';

/** How an attempt's answer bears on the endpoint's adaptive limit. */
export type LoadSignal = 'fast' | 'slow' | 'congested' | 'none';

interface Failure {
  delivery: ClaimedAttempt;
  /** How long the answer took (ms); null when none came (time-out, connection error). */
  answerMs?: number | null;
  status: number | null;
  error: string;
  /** The subscriber answered 410 Gone: it asks not to be called again. */
  gone: boolean;
  signal: LoadSignal;
  /** A 429/503 Retry-After: the whole endpoint waits until then. */
  pauseUntil: number | null;
}

export type Outcome =
  | { kind: 'succeeded'; delivery: ClaimedAttempt; status: number; signal: LoadSignal; answerMs?: number }
  | ({ kind: 'retry'; retryAt: number; firstHeaders: string | null } & Failure)
  | ({ kind: 'dead'; deadLetter: { id: string; original: Buffer } | null } & Failure);

/** What the sender tells of an attempt (delivery/sender.ts, SendResult). */
export interface AttemptResult {
  ok: boolean;
  /** HTTP status, or null when no answer arrived. */
  status: number | null;
  /** Why the attempt failed; null on success. */
  error: string | null;
  retryAfterMs: number | null;
  durationMs: number;
}

/** A 2xx slower than this does not grow the endpoint's limit (it is busy enough). */
export const FAST_ANSWER_MS = 1000;

/**
 * What an answer says about the endpoint's capacity: a quick 2xx is room to grow; time-outs,
 * connection errors, 429 and 503 are congestion. Other answers, 500 and the rest of 4xx and 5xx, say
 * nothing about load by their status: a subscriber that fails some requests quickly is not
 * overloaded. Their answer times still count (an overloaded subscriber answers slowly, whatever it
 * answers): store/endpoint-queues.ts, settlementAssignments.
 */
export function loadSignal(result: AttemptResult): LoadSignal {
  if (result.ok) return result.durationMs < FAST_ANSWER_MS ? 'fast' : 'slow';
  if (result.status === null || result.status === 429 || result.status === 503) return 'congested';
  return 'none';
}

/** What judgeAttempt needs of the attempt besides its result. */
export interface Attempted {
  delivery: ClaimedAttempt;
  /** The headers it was sent with (empty if it was not sent). */
  headers: Record<string, string>;
  /** The message's raw body; null if it could not be opened. */
  body: string | null;
}

/** The outcome of an attempt: success, a retry after its backoff, or death after the last attempt. */
export function judgeAttempt(
  ctx: Context,
  { delivery, headers, body }: Attempted,
  result: AttemptResult,
  random: () => number,
): Outcome {
  // Backoff counts from the end of the attempt: a retry is never due before its attempt was over.
  const now = ctx.clock();
  const signal = loadSignal(result);
  const answerMs = result.status === null ? null : result.durationMs;
  if (result.ok)
    return { kind: 'succeeded', delivery, status: result.status ?? 200, signal, answerMs: result.durationMs };
  const failure = {
    delivery,
    answerMs,
    status: result.status,
    error: result.error ?? 'failed',
    gone: result.status === 410,
    signal,
    pauseUntil: result.retryAfterMs === null ? null : now + Math.min(result.retryAfterMs, RETRY_AFTER_CAP_MS),
  };
  if (delivery.attempts >= 1 + ctx.config.maxRetries) {
    // A test event is not dead-lettered: nothing was lost (docs/operators.md, "Test events").
    if (delivery.replay_of || delivery.is_test || body === null) {
      return { kind: 'dead', ...failure, deadLetter: null };
    }
    const id = newId('deadLetter', now);
    const firstHeaders = delivery.first_headers
      ? (JSON.parse(delivery.first_headers) as Record<string, string>)
      : headers;
    return {
      kind: 'dead',
      ...failure,
      deadLetter: { id, original: sealOriginal(ctx.envelope, id, { body, headers: firstHeaders }) },
    };
  }
  const delay = retryDelay(
    delivery.attempts,
    { baseMs: ctx.config.retryBaseMs, maxMs: ctx.config.retryMaxMs },
    result.retryAfterMs,
    random,
  );
  return {
    kind: 'retry',
    ...failure,
    retryAt: now + delay,
    firstHeaders: delivery.first_headers || body === null ? null : JSON.stringify(headers),
  };
}

/**
 * The usual batch: every attempt succeeded at an endpoint that was healthy. Nothing to restore, no
 * dead letters, no retries: the store records it in one statement (PostgreSQL), or in one short
 * transaction that also claims (SQLite).
 */
function allHealthySuccesses(batch: readonly Outcome[]): boolean {
  return batch.every((o) => o.kind === 'succeeded' && o.delivery.endpoint_healthy);
}

/** Whether writeOutcomes claims work for the room `batch` frees, in the same transaction. */
export function claimsWithWrite(db: Db, batch: readonly Outcome[]): boolean {
  return (
    allHealthySuccesses(batch) &&
    claimsWithSuccesses(
      db,
      batch.map((o) => o.delivery),
    )
  );
}

export interface Written {
  /** What was claimed for the room the batch freed (claimsWithWrite); empty otherwise. */
  claimed: ClaimedAttempt[];
}

/**
 * Writes a batch of outcomes; where claimsWithWrite, claims up to `room` deliveries in the same
 * transaction, at the batch's time (a keyed delivery the batch lets go is due then).
 */
export async function writeOutcomes(ctx: Context, batch: readonly Outcome[], room: number): Promise<Written> {
  if (allHealthySuccesses(batch)) return writeHealthySuccesses(ctx, batch, room);
  const { recorded, health } = await ctx.db.transaction((tx) => writeMixed(ctx, tx, batch));
  logHealth(ctx, health);
  for (const o of recorded) ctx.metrics.deliveries.inc({ outcome: o.kind === 'retry' ? 'failed' : o.kind });
  return { claimed: [] };
}

async function writeHealthySuccesses(
  ctx: Context,
  batch: readonly Outcome[],
  room: number,
): Promise<Written> {
  const now = ctx.clock();
  const written = await recordSuccessesThenClaim(
    ctx.db,
    batch.map((o) => ({
      id: o.delivery.id,
      attempt: o.delivery.attempts,
      status: o.kind === 'succeeded' ? o.status : 0,
      endpoint_id: o.delivery.endpoint_id,
      tenant_id: o.delivery.tenant_id,
      fast: o.signal === 'fast',
      answerMs: o.answerMs ?? null,
      ordering_key: o.delivery.ordering_key,
    })),
    now,
    ctx.config.endpointConcurrency,
    room > 0 ? claimOptions(ctx, now, room) : null,
  );
  ctx.metrics.deliveries.inc({ outcome: 'succeeded' }, written.rows.length);
  return { claimed: written.claimed ?? [] };
}

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];

/**
 * A batch with failures or endpoints to restore: the queue rows locked first (the lock order of every
 * transaction, store/endpoint-queues.ts), then the fenced transitions, and what follows from the rows
 * the fence let through: lines advanced, dead letters, statistics, queue settlement, endpoint health.
 */
async function writeMixed(
  ctx: Context,
  tx: Tx,
  batch: readonly Outcome[],
): Promise<{ recorded: Outcome[]; health: HealthChanges }> {
  const now = ctx.clock();
  const byId = new Map(batch.map((o) => [o.delivery.id, o]));
  const successes = batch.filter((o) => o.kind === 'succeeded');
  // Only failures cost a seal: the subscriber's answer, never in clear (engine/last-error.ts).
  const failures = batch.filter((o) => o.kind !== 'succeeded');
  const errors = new Map<Outcome, SplitError>(failures.map((o) => [o, splitError(o.error)]));
  const sealed = (o: Outcome, aad: string) => sealAnswer(ctx.envelope, errors.get(o)!.answer, aad);
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
      response: sealed(o, deliveryAnswerAad(o.delivery.id)),
      retryAt: o.kind === 'retry' ? o.retryAt : null,
      firstHeaders: o.kind === 'retry' ? o.firstHeaders : null,
    })),
    now,
  );
  // Only what the fence let through counts: a stale outcome (its lease expired and the delivery was
  // attempted again, or it was cancelled meanwhile) is neither a success nor a failure.
  const recorded = [...completed, ...failed].map((r) => byId.get(r.id)!);
  // A keyed delivery that succeeded or died lets the next of its line go; a retry keeps its place.
  await advanceLines(tx, [...completed, ...failed.filter((r) => r.status === 'dead')], now);
  const dead = recorded.filter((o) => o.kind === 'dead');
  await recordReplayDeaths(tx, replayDeaths(dead, errors, sealed), now);
  await insertDeadLetters(tx, deadLetterRows(dead, errors, sealed, now));
  await addStats(tx, tally(recorded, now));
  await settleQueues(tx, settlements(recorded), ctx.config.endpointConcurrency, now);
  const health = await recordEndpointHealth(tx, healthInput(recorded), now, ctx.config.circuitBreakAfterMs);
  return { recorded, health };
}

type Sealer = (o: Outcome, aad: string) => Buffer | null;

/** A replay that died updates the dead letter it replayed instead of adding one. */
function replayDeaths(dead: readonly Outcome[], errors: ReadonlyMap<Outcome, SplitError>, sealed: Sealer) {
  return dead
    .filter((o) => o.delivery.replay_of)
    .map((o) => ({
      id: o.delivery.replay_of!,
      attempts: o.delivery.attempts,
      lastError: errors.get(o)!.reason,
      lastResponse: sealed(o, deadLetterAnswerAad(o.delivery.replay_of!)),
    }));
}

function deadLetterRows(
  dead: readonly Outcome[],
  errors: ReadonlyMap<Outcome, SplitError>,
  sealed: Sealer,
  now: number,
): DeadLetterRow[] {
  return dead.flatMap((o): DeadLetterRow[] =>
    o.kind !== 'dead' || o.delivery.replay_of || !o.deadLetter
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
            last_response: sealed(o, deadLetterAnswerAad(o.deadLetter.id)),
            original: o.deadLetter.original,
            died_at: now,
            replayed_at: null,
            replay_delivery_id: null,
          },
        ],
  );
}

function healthInput(recorded: readonly Outcome[]): HealthInput {
  const endpoints = (pick: (o: Outcome) => boolean) =>
    recorded.filter(pick).map((o) => o.delivery.endpoint_id);
  return {
    succeeded: endpoints((o) => o.kind === 'succeeded'),
    // Endpoints healthy when claimed have nothing to restore: two statements saved per flush.
    restore: endpoints((o) => o.kind === 'succeeded' && !o.delivery.endpoint_healthy),
    failing: endpoints((o) => o.kind !== 'succeeded' && !o.gone),
    gone: endpoints((o) => o.kind !== 'succeeded' && o.gone),
  };
}

function logHealth({ logger }: Context, health: HealthChanges): void {
  for (const id of health.closed) logger.info({ endpoint_id: id }, 'endpoint answered again; circuit closed');
  for (const o of health.opened)
    logger.warn(
      { endpoint_id: o.id, until: new Date(o.until).toISOString() },
      'endpoint keeps failing; circuit open',
    );
  for (const id of health.disabledGone)
    logger.warn({ endpoint_id: id }, 'endpoint answered 410 Gone; disabled');
  for (const id of health.disabledFailing)
    logger.warn({ endpoint_id: id }, 'endpoint failing for days; disabled');
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
    const refused = o.kind === 'succeeded' ? null : refusalOf(o.error);
    if (refused !== null) s[`refused_${refused}`] += 1;
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
    addAnswer(s, o.answerMs, o.kind === 'succeeded');
    if (o.kind !== 'succeeded' && o.pauseUntil !== null) {
      s.pauseUntil = Math.max(s.pauseUntil ?? 0, o.pauseUntil);
    }
  }
  return [...byEndpoint.values()];
}
