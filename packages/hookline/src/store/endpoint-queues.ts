// One row per endpoint: what claims need to know about it, kept up to date by every transition that
// moves its deliveries (docs/architecture.md, "Endpoint queues"). Rows are always locked in endpoint
// id order, and before any of their deliveries, so two transactions never wait on each other in
// opposite orders.
import { greatest, jsonRecords, jsonTextArray, least, placeholders, type Queryable } from './db.js';

/** Where a queue's adaptive limit starts (the column defaults of migration 004 say the same). */
export const INITIAL_CONCURRENCY = 8;
/** No threshold until the first congestion: the limit doubles each round trip until then. */
export const INITIAL_SLOW_START_THRESHOLD = 1_000_000;

export interface EndpointQueueRow {
  endpoint_id: string;
  active: number;
  /** Waiting deliveries: pending (due or waiting for a retry) and held behind an earlier one of their key. */
  queued: number;
  /** No pending delivery falls due before this (a lower bound); NULL when none is pending. */
  next_due_at: number | null;
  /** Claimed and not yet recorded, all workers together. */
  in_flight: number;
  concurrency_limit: number;
  concurrency_credit: number;
  slow_start_threshold: number;
  last_decrease_at: number | null;
  /** Recent answer time, ms: a moving average over about the last RECENT_ANSWERS answers. */
  answer_ms_recent: number | null;
  /** The least 2xx answer time seen, ms, forgotten slowly (FLOOR_ANSWERS): the time without a queue. */
  answer_ms_floor: number | null;
  /** Since when the recent answer time has been above what the floor allows; null while it is not. */
  answer_slow_since: number | null;
  paused_until: number | null;
  /** The endpoint's rate_limit as the rate limiter uses it (GCRA): microseconds between attempts… */
  rate_interval_us: number | null;
  /** …and how far ahead of that pace a claim may run (a small burst); both null without a limit. */
  rate_tolerance_us: number | null;
  /** The theoretical arrival time of the next attempt, in microseconds. */
  rate_tat_us: number | null;
  /** The rate limit allows no attempt before this. */
  throttled_until: number | null;
  ready_at: number | null;
}

/** What a batch of inserted or returned deliveries adds to one endpoint's queue. */
export interface QueueArrivals {
  endpoint_id: string;
  count: number;
  /** The earliest of their due times; null when all of them are held. */
  due: number | null;
}

/** Sums arrivals per endpoint, sorted by endpoint id (the lock order). Held rows count, but are not due. */
export function arrivalsOf(
  rows: readonly { endpoint_id: string; next_attempt_at: number; status?: string }[],
): QueueArrivals[] {
  const byEndpoint = new Map<string, QueueArrivals>();
  for (const r of rows) {
    const due = r.status === 'held' ? null : r.next_attempt_at;
    const a = byEndpoint.get(r.endpoint_id);
    if (!a) byEndpoint.set(r.endpoint_id, { endpoint_id: r.endpoint_id, count: 1, due });
    else {
      a.count += 1;
      if (due !== null && (a.due === null || due < a.due)) a.due = due;
    }
  }
  return [...byEndpoint.values()].sort((a, b) => (a.endpoint_id < b.endpoint_id ? -1 : 1));
}

const earlier = (current: string, incoming: string) =>
  `CASE WHEN ${current} IS NULL OR ${incoming} < ${current} THEN ${incoming} ELSE ${current} END`;

/**
 * Counts new pending deliveries into their endpoints' queues (creating a queue row if there is none)
 * and brings each queue's next due time forward to theirs.
 */
export async function enqueue(q: Queryable, arrivals: readonly QueueArrivals[]): Promise<void> {
  if (arrivals.length === 0) return;
  const items = jsonRecords(q.dialect, 1, { item_endpoint: 'text', item_count: 'int', item_due: 'bigint' });
  await q.run(
    // `WHERE true` lets SQLite tell the upsert's ON CONFLICT from a join constraint.
    enqueueStatement(
      `SELECT item_endpoint, item_count, item_due FROM ${items} WHERE true ORDER BY item_endpoint`,
    ),
    [
      JSON.stringify(
        arrivals.map((a) => ({ item_endpoint: a.endpoint_id, item_count: a.count, item_due: a.due })),
      ),
    ],
  );
}

/**
 * enqueue as SQL, over `arrivals`: a SELECT of (endpoint id, count, earliest due or NULL) rows in
 * endpoint id order (the lock order).
 */
export function enqueueStatement(arrivals: string): string {
  return `INSERT INTO endpoint_queues (endpoint_id, queued, next_due_at) ${arrivals}
     ON CONFLICT (endpoint_id) DO UPDATE SET
       queued = endpoint_queues.queued + excluded.queued,
       next_due_at = ${earlier('endpoint_queues.next_due_at', 'excluded.next_due_at')}`;
}

/**
 * enqueue's due time alone, as a statement over the rows (endpoint_id, next_attempt_at) of `source`
 * (a CTE of the same statement): for deliveries already counted in `queued` (held, now pending), on
 * queue rows that exist and that the caller has locked.
 */
export function bringDueForward(source: string): string {
  return `UPDATE endpoint_queues SET next_due_at = ${earlier('endpoint_queues.next_due_at', 'p.due')}
    FROM (SELECT endpoint_id, MIN(next_attempt_at) AS due FROM ${source} GROUP BY endpoint_id) p
    WHERE endpoint_queues.endpoint_id = p.endpoint_id`;
}

/** Creates the queue row of a new endpoint, in the endpoint's own transaction. */
export async function createQueue(q: Queryable, endpointId: string): Promise<void> {
  await q.run('INSERT INTO endpoint_queues (endpoint_id) VALUES ($1) ON CONFLICT (endpoint_id) DO NOTHING', [
    endpointId,
  ]);
}

/** What a flush of attempt outcomes does to one endpoint's queue and adaptive limit. */
export interface QueueSettlement {
  endpoint_id: string;
  /** Attempts of this endpoint whose outcome was recorded (the fence let them through). */
  finished: number;
  /** Of those, how many went back to pending for a retry, and the earliest retry time. */
  requeued: number;
  requeuedDue: number | null;
  /** 2xx answers that came quickly: each is credit towards a larger limit. */
  fast: number;
  /** A time-out, connection error, 429 or 503 was among them: halve the limit. */
  congested: boolean;
  /** A 429/503 asked to wait (Retry-After): the whole endpoint pauses until then. */
  pauseUntil: number | null;
  /** Attempts that got an answer (any status), and the sum of their answer times: the latency signal. */
  answers: number;
  answerMsSum: number;
  /** The quickest 2xx among them. */
  answerMsMin: number | null;
}

/** A settlement of nothing yet, to count a flush's outcomes into. */
export function emptySettlement(endpointId: string): QueueSettlement {
  return {
    endpoint_id: endpointId,
    finished: 0,
    requeued: 0,
    requeuedDue: null,
    fast: 0,
    congested: false,
    pauseUntil: null,
    answers: 0,
    answerMsSum: 0,
    answerMsMin: null,
  };
}

/**
 * Counts one attempt's answer time into a settlement (null: no answer, a time-out or connection
 * error). Only 2xx answers make the floor: a subscriber refusing some requests at once (a 401 from its
 * gateway) says nothing about how long its work takes.
 */
export function addAnswer(s: QueueSettlement, answerMs: number | null | undefined, ok: boolean): void {
  if (answerMs === null || answerMs === undefined) return;
  s.answers += 1;
  s.answerMsSum += answerMs;
  if (ok) s.answerMsMin = s.answerMsMin === null ? answerMs : Math.min(s.answerMsMin, answerMs);
}

/** The limit comes down at most once per this long, however many answers report the same overload. */
export const DECREASE_INTERVAL_MS = 1000;
/** The recent answer time averages about this many answers (a flush of n moves it n/this of the way). */
export const RECENT_ANSWERS = 8;
/**
 * The floor, the least 2xx answer time seen, drifts up towards later ones over about this many answers
 * while the endpoint is not queueing, so that a subscriber whose answers became slower for good (it
 * moved farther away) gets its limit back in time; a quicker answer lowers it at once.
 */
export const FLOOR_ANSWERS = 10_000;
/**
 * Queueing is a recent answer time above ANSWER_TOLERANCE × the floor + ANSWER_SLACK_MS: answers
 * taking twice as long as without a queue, and some more. The slack is for subscribers answering in
 * a millisecond or two, whose answer times a worker's own pause (a busy event loop, a garbage
 * collection) would otherwise double, and for a few slower kinds of event among quick ones.
 */
export const ANSWER_TOLERANCE = 2;
export const ANSWER_SLACK_MS = 50;
/**
 * Answers must stay that slow for this long before the limit comes down: a queue at the subscriber
 * lasts, while a pause of the worker itself (its event loop or its machine busy for a moment) makes
 * every answer of that moment look slow and then passes.
 */
export const QUEUEING_PERSIST_MS = 500;

/** An integer no larger than `x` (x ≥ 0): PostgreSQL's cast rounds, SQLite's truncates. */
const floorInt = (d: Queryable['dialect'], x: string) =>
  d === 'postgres' ? `CAST(FLOOR(${x}) AS INTEGER)` : `CAST(${x} AS INTEGER)`;

const allowance = (floor: string) => `(${floor} * ${ANSWER_TOLERANCE} + ${ANSWER_SLACK_MS})`;

/**
 * The answer-time figures a settlement leaves, as SQL over the row's old values and the flush's
 * `t.item_answers`, `t.item_answer_us` (their sum) and `t.item_answer_min_us` (the least 2xx): the
 * recent time moves towards the flush's mean; the floor drops to the flush's least 2xx, or drifts up
 * towards it while the recent time (before this flush) is within the allowance. Every assignment of one UPDATE reads the
 * old row, so these are spelled out wherever they are used.
 */
function answerTimes(d: Queryable['dialect']): { recent: string; floor: string } {
  const n = 't.item_answers';
  const mean = `(t.item_answer_us / 1000.0 / ${n})`;
  const least1 = (x: string) => least(d, '1.0', x);
  const old = 'endpoint_queues.answer_ms_recent';
  const recent = `(CASE WHEN ${n} = 0 THEN ${old} WHEN ${old} IS NULL THEN ${mean}
    ELSE ${old} + (${mean} - ${old}) * ${least1(`${n} / ${RECENT_ANSWERS}.0`)} END)`;
  const oldFloor = 'endpoint_queues.answer_ms_floor';
  const min = '(t.item_answer_min_us / 1000.0)';
  const floor = `(CASE WHEN t.item_answer_min_us IS NULL THEN ${oldFloor}
    WHEN ${oldFloor} IS NULL OR ${min} < ${oldFloor} THEN ${min}
    WHEN ${old} > ${allowance(oldFloor)} THEN ${oldFloor}
    ELSE ${oldFloor} + (${min} - ${oldFloor}) * ${least1(`${n} / ${FLOOR_ANSWERS}.0`)} END)`;
  return { recent, floor };
}

/**
 * The assignments of a settlement, reading its figures from `t.item_finished`, `t.item_requeued`,
 * `t.item_due`, `t.item_fast`, `t.item_congested`, `t.item_pause` and the answer times (answerTimes),
 * the ceiling from `ceiling` and the time from `now` (SQL expressions): shared by settleQueues and
 * PostgreSQL's one-statement flush.
 *
 * The adaptive limit (docs/architecture.md, "Adaptive concurrency") tells overload from errors. It
 * comes down on congestion (a time-out, connection error, 429 or 503: halved) and on a queue at the
 * subscriber (the recent answer time above ANSWER_TOLERANCE × the floor + ANSWER_SLACK_MS for
 * QUEUEING_PERSIST_MS: cut to the share of the two, at most by half), at most once per
 * DECREASE_INTERVAL_MS, the slow-start threshold following it down; while answers are that slow it
 * does not grow. Other answers, a fast 500 among them, say nothing about load. Otherwise it grows as
 * TCP's window does: below the slow-start threshold each fast success adds one, above it one per
 * limit's worth of fast successes.
 */
export function settlementAssignments(
  d: Queryable['dialect'],
  ceiling: string,
  now: string,
  /** `t.item_recent` and `t.item_floor` hold answerTimes already (settleQueues on SQLite). */
  precomputed = false,
): string {
  const limit = 'endpoint_queues.concurrency_limit';
  const credit = 'endpoint_queues.concurrency_credit';
  const threshold = 'endpoint_queues.slow_start_threshold';
  const slowSince = 'endpoint_queues.answer_slow_since';
  const { recent, floor } = precomputed ? { recent: 't.item_recent', floor: 't.item_floor' } : answerTimes(d);
  const allowed = allowance(floor);
  const slow = `(t.item_answers > 0 AND ${recent} > ${allowed})`;
  const queueing = `(${slow} AND ${slowSince} IS NOT NULL AND ${slowSince} <= ${now} - ${QUEUEING_PERSIST_MS})`;
  const hold = `(t.item_congested = 1 OR ${slow})`;
  const decrease = `((t.item_congested = 1 OR ${queueing}) AND (endpoint_queues.last_decrease_at IS NULL
    OR endpoint_queues.last_decrease_at <= ${now} - ${DECREASE_INTERVAL_MS}))`;
  const decreased = greatest(
    d,
    '1',
    `CASE WHEN t.item_congested = 1 THEN ${limit} / 2
      ELSE ${floorInt(d, `${limit} * ${greatest(d, '0.5', `${allowed} / ${greatest(d, recent, '0.001')}`)}`)} END`,
  );
  const slowStart = `(${limit} < ${threshold})`;
  const additive = `(${credit} + t.item_fast >= ${limit})`;
  return `in_flight = ${greatest(d, '0', 'endpoint_queues.in_flight - t.item_finished')},
       queued = endpoint_queues.queued + t.item_requeued,
       next_due_at = CASE WHEN t.item_due IS NULL THEN endpoint_queues.next_due_at
         ELSE ${earlier('endpoint_queues.next_due_at', 't.item_due')} END,
       concurrency_limit = CASE
         WHEN ${decrease} THEN ${decreased}
         WHEN ${hold} OR t.item_fast = 0 THEN ${least(d, limit, ceiling)}
         WHEN ${slowStart} THEN ${least(d, `${limit} + t.item_fast`, threshold, ceiling)}
         WHEN ${additive} THEN ${least(d, `${limit} + 1`, ceiling)}
         ELSE ${least(d, limit, ceiling)} END,
       concurrency_credit = CASE
         WHEN ${hold} OR ${slowStart} THEN 0
         WHEN t.item_fast = 0 THEN ${credit}
         WHEN ${additive} THEN ${credit} + t.item_fast - ${limit}
         ELSE ${credit} + t.item_fast END,
       slow_start_threshold = CASE WHEN ${decrease} THEN ${decreased} ELSE ${threshold} END,
       last_decrease_at = CASE WHEN ${decrease} THEN ${now} ELSE endpoint_queues.last_decrease_at END,
       answer_ms_recent = ${recent},
       answer_ms_floor = ${floor},
       answer_slow_since = CASE WHEN t.item_answers = 0 THEN ${slowSince}
         WHEN ${slow} THEN COALESCE(${slowSince}, ${now}) END,
       paused_until = CASE WHEN t.item_pause IS NOT NULL
         AND (endpoint_queues.paused_until IS NULL OR t.item_pause > endpoint_queues.paused_until)
         THEN t.item_pause ELSE endpoint_queues.paused_until END`;
}

/** The columns of a settlement's rows (`t`), as settleQueues passes them. */
const SETTLEMENT_COLUMNS = {
  item_endpoint: 'text',
  item_finished: 'int',
  item_requeued: 'int',
  item_due: 'bigint',
  item_fast: 'int',
  item_congested: 'int',
  item_pause: 'bigint',
  item_answers: 'int',
  item_answer_us: 'bigint',
  item_answer_min_us: 'bigint',
} as const;

const SETTLE_SQL: Partial<Record<Queryable['dialect'], string>> = {};

function settleStatement(d: Queryable['dialect']): string {
  const items = jsonRecords(d, 1, SETTLEMENT_COLUMNS);
  const now = 'CAST($3 AS BIGINT)';
  // No lock of its own. A CTE that locked the rows again here was, on SQLite, evaluated once more for
  // every row updated: 2.2 ms for a flush across 64 endpoints (bench/HISTORY.md, "Session of run R").
  if (d === 'postgres')
    return `UPDATE endpoint_queues SET ${settlementAssignments(d, '$2', now)}
      FROM ${items} WHERE endpoint_queues.endpoint_id = t.item_endpoint`;
  // On SQLite the rows are read out of their JSON once, and the new answer times worked out once per
  // row, before the UPDATE (MATERIALIZED): flattened into it, every mention of a column of `t` parsed
  // its JSON element again and every assignment that reads the answer times worked them out again
  // (4-5× the time of a settlement without them). SQLite's one writer is this transaction's, so the
  // queue row read there is the row updated; PostgreSQL reads them inline (record-successes.ts must).
  const { recent, floor } = answerTimes(d);
  return `WITH i AS MATERIALIZED (SELECT * FROM ${items}),
    t AS MATERIALIZED (
      SELECT t.*, ${recent} AS item_recent, ${floor} AS item_floor
      FROM i AS t JOIN endpoint_queues ON endpoint_queues.endpoint_id = t.item_endpoint)
    UPDATE endpoint_queues SET ${settlementAssignments(d, '$2', now, true)}
    FROM t WHERE endpoint_queues.endpoint_id = t.item_endpoint`;
}

/**
 * Applies flushes' outcomes to their endpoints' queues and adaptive limits, in one statement. The
 * caller has locked these queue rows (lockQueues) before it changed their deliveries, as every
 * caller must anyway.
 */
export async function settleQueues(
  q: Queryable,
  settlements: readonly QueueSettlement[],
  ceiling: number,
  now: number,
): Promise<void> {
  if (settlements.length === 0) return;
  const d = q.dialect;
  // Built once per dialect: the statement is the same for every flush.
  const sql = (SETTLE_SQL[d] ??= settleStatement(d));
  await q.run(sql, [
    JSON.stringify(
      settlements.map((s) => ({
        item_endpoint: s.endpoint_id,
        item_finished: s.finished,
        item_requeued: s.requeued,
        item_due: s.requeuedDue,
        item_fast: s.fast,
        item_congested: s.congested ? 1 : 0,
        item_pause: s.pauseUntil,
        item_answers: s.answers,
        item_answer_us: Math.round(s.answerMsSum * 1000),
        item_answer_min_us: s.answerMsMin === null ? null : Math.round(s.answerMsMin * 1000),
      })),
    ),
    ceiling,
    now,
  ]);
}

/** Pauses endpoints until the given times (an open circuit); a longer pause already set stays. */
export async function pauseQueues(
  q: Queryable,
  pauses: readonly { endpoint_id: string; until: number }[],
): Promise<void> {
  if (pauses.length === 0) return;
  const items = jsonRecords(q.dialect, 1, { item_endpoint: 'text', item_until: 'bigint' });
  await q.run(
    `UPDATE endpoint_queues SET paused_until = CASE
       WHEN endpoint_queues.paused_until IS NULL OR t.item_until > endpoint_queues.paused_until THEN t.item_until
       ELSE endpoint_queues.paused_until END
     FROM ${items} WHERE endpoint_queues.endpoint_id = t.item_endpoint`,
    [
      JSON.stringify(
        [...pauses].sort(byEndpoint).map((p) => ({ item_endpoint: p.endpoint_id, item_until: p.until })),
      ),
    ],
  );
}

function byEndpoint(a: { endpoint_id: string }, b: { endpoint_id: string }): number {
  return a.endpoint_id < b.endpoint_id ? -1 : a.endpoint_id > b.endpoint_id ? 1 : 0;
}

/**
 * An endpoint's queue stops (disabled, deleted) or starts again (re-enabled, restored). Starting
 * again is a fresh start: no pause, the limit back at its initial value, and whatever waited due now.
 */
export async function setQueueActive(
  q: Queryable,
  endpointId: string,
  active: boolean,
  now: number,
): Promise<void> {
  if (!active) {
    await q.run('UPDATE endpoint_queues SET active = 0 WHERE endpoint_id = $1', [endpointId]);
    return;
  }
  await q.run(
    `INSERT INTO endpoint_queues (endpoint_id) VALUES ($1)
     ON CONFLICT (endpoint_id) DO UPDATE SET active = 1, paused_until = NULL, last_decrease_at = NULL,
       concurrency_limit = ${INITIAL_CONCURRENCY}, concurrency_credit = 0,
       answer_ms_recent = NULL, answer_ms_floor = NULL, answer_slow_since = NULL,
       slow_start_threshold = ${INITIAL_SLOW_START_THRESHOLD},
       next_due_at = CASE WHEN endpoint_queues.queued > 0 THEN $2 ELSE endpoint_queues.next_due_at END`,
    [endpointId, now],
  );
}

/**
 * The pace a rate limit sets (docs/architecture.md, "Rate limits"), a generic cell rate algorithm:
 * attempts `interval` apart, a claim taking as many as fit while it runs no more than `tolerance`
 * ahead of that pace, so a claimer that wakes a little early loses no slot and high limits are claimed
 * a burst at a time. In any window of w seconds at most ⌊(w + tolerance)/interval⌋ + 1 attempts are
 * claimed, which stays within `rate_limit` for w = 1 s plus whatever jitter lies between claims and
 * arrivals at the subscriber, as long as tolerance + jitter < 1/headroom − 1 s: with the pace 4 %
 * under the limit and 5 ms of tolerance, about 35 ms of jitter.
 */
export function ratePace(rateLimit: number): { intervalUs: number; toleranceUs: number } {
  return { intervalUs: Math.ceil(1_000_000 / (rateLimit * RATE_HEADROOM)), toleranceUs: RATE_TOLERANCE_US };
}

const RATE_HEADROOM = 0.96;

/**
 * Rate-limited attempts are sent this long after their slot, so that a claim's own duration (a few
 * milliseconds, more on a loaded database) does not bunch them: 50 ms, or 32 intervals at high limits,
 * so that a worker's concurrency is not spent waiting.
 */
export const PACED_SEND_DELAY_MAX_US = 50_000;
export const PACED_SEND_DELAY_INTERVALS = 32;

export function pacedSendDelayUs(intervalUs: number): number {
  return Math.min(PACED_SEND_DELAY_MAX_US, PACED_SEND_DELAY_INTERVALS * intervalUs);
}

/**
 * How far in the past a late claim may resume the pace: half the send delay. Sent at slot + delay,
 * such a slot is still ahead, so a claim that comes a little late loses no slot, and its attempts still
 * go one interval after the last.
 */
export function paceLateCreditUs(intervalUs: number): number {
  return pacedSendDelayUs(intervalUs) / 2;
}
const RATE_TOLERANCE_US = 5_000;

/** Sets or removes an endpoint's rate limit in its queue. */
export async function setQueueRate(
  q: Queryable,
  endpointId: string,
  rateLimit: number | null,
): Promise<void> {
  const pace = rateLimit === null ? null : ratePace(rateLimit);
  await q.run(
    `UPDATE endpoint_queues SET rate_interval_us = CAST($2 AS BIGINT), rate_tolerance_us = CAST($3 AS BIGINT),
       throttled_until = CASE WHEN CAST($2 AS BIGINT) IS NULL THEN NULL ELSE throttled_until END
     WHERE endpoint_id = $1`,
    [endpointId, pace?.intervalUs ?? null, pace?.toleranceUs ?? null],
  );
}

/** Empties a deleted endpoint's queue once its deliveries are cancelled. */
export async function clearQueue(q: Queryable, endpointId: string): Promise<void> {
  await q.run(
    'UPDATE endpoint_queues SET active = 0, queued = 0, in_flight = 0, next_due_at = NULL WHERE endpoint_id = $1',
    [endpointId],
  );
}

/**
 * Locks endpoints' queue rows, in id order, before their deliveries or endpoint rows are changed: the
 * lock order every transaction follows (queue rows, then deliveries, then the dead-letter counter,
 * then endpoint rows), so two of them never wait on each other in opposite orders.
 */
export async function lockQueues(q: Queryable, endpointIds: readonly string[]): Promise<void> {
  if (q.dialect !== 'postgres' || endpointIds.length === 0) return;
  const sorted = [...new Set(endpointIds)].sort();
  await q.all(
    `SELECT endpoint_id FROM endpoint_queues WHERE endpoint_id IN (${placeholders(sorted.length)})
     ORDER BY endpoint_id FOR UPDATE`,
    sorted,
  );
}

/**
 * Removes the dead versions of the queue rows (PostgreSQL; SQLite updates rows in place). Every claim,
 * fan-out and flush of an endpoint writes a new version of its one row, a thousand a second under a
 * stream of emits, and every claim reads the table: left to autovacuum, which visits a database at
 * most once a minute, the table of three rows grew by a page every few seconds and each claim read
 * all of it. Vacuumed every few seconds it stays a few pages long (docs/scaling.md, "Vacuum"). The
 * fan-out queue (store/messages.ts) likewise: a row inserted and deleted per message, read by every
 * fan-out. SKIP_LOCKED: a vacuum already under way (another worker's) is enough.
 */
export async function vacuumQueues(q: Queryable): Promise<void> {
  if (q.dialect !== 'postgres') return;
  await q.run('VACUUM (SKIP_LOCKED) endpoint_queues, fanout_queue');
}

/** When the soonest endpoint becomes claimable, from the ready index alone. */
export async function nextReadyAt(q: Queryable): Promise<number | null> {
  const row = await q.one<{ at: number | null }>(
    'SELECT MIN(ready_at) AS at FROM endpoint_queues WHERE ready_at IS NOT NULL',
  );
  return row?.at == null ? null : Number(row.at);
}

export async function getQueues(q: Queryable, endpointIds: readonly string[]): Promise<EndpointQueueRow[]> {
  if (endpointIds.length === 0) return [];
  return q.all<EndpointQueueRow>(
    `SELECT * FROM endpoint_queues WHERE endpoint_id IN (${jsonTextArray(q.dialect, 1)})`,
    [JSON.stringify(endpointIds)],
  );
}

export interface QueueTotals {
  /** Pending deliveries of endpoints that can be claimed from now. */
  due: number;
  /** Pending deliveries waiting: for a retry, a pause, an open circuit or a disabled endpoint. */
  scheduled: number;
  delivering: number;
}

/**
 * The backlog from the queue counters: one row per endpoint read, never the deliveries themselves.
 * An endpoint whose earliest pending delivery is due counts all its pending ones as due.
 */
export async function queueTotals(q: Queryable, now: number): Promise<QueueTotals> {
  const row = await q.one<{ due: number | null; scheduled: number | null; delivering: number | null }>(
    `SELECT
       SUM(CASE WHEN active = 1 AND next_due_at <= $1 AND (paused_until IS NULL OR paused_until <= $1)
         THEN queued ELSE 0 END) AS due,
       SUM(CASE WHEN active = 1 AND next_due_at <= $1 AND (paused_until IS NULL OR paused_until <= $1)
         THEN 0 ELSE queued END) AS scheduled,
       SUM(in_flight) AS delivering
     FROM endpoint_queues`,
    [now],
  );
  return {
    due: Number(row?.due ?? 0),
    scheduled: Number(row?.scheduled ?? 0),
    delivering: Number(row?.delivering ?? 0),
  };
}
