// The endpoint queues of store/endpoint-queues.ts, on both stores: the adaptive limit (AIMD) and the
// counters settleQueues keeps, the generated ready_at that claims read, the in-flight safety net,
// totals for the console, and the claim's shape: a saturated endpoint's backlog costs others
// nothing, and on PostgreSQL the limit holds across several claiming pools.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import {
  completeDeliveries,
  reconcileInFlight,
  reconcileNextDue,
  releaseDeliveries,
} from '../../src/store/deliveries.js';
import type { ClaimedAttempt } from '../../src/store/attempts.js';
import {
  DECREASE_INTERVAL_MS,
  INITIAL_CONCURRENCY,
  INITIAL_SLOW_START_THRESHOLD,
  QUEUEING_PERSIST_MS,
  enqueue,
  nextReadyAt,
  pauseQueues,
  queueTotals,
  setQueueActive,
  settleQueues,
  type QueueSettlement,
} from '../../src/store/endpoint-queues.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  CEILING,
  T0,
  addDeliveries,
  addEndpoint,
  claimAt,
  dueTimes,
  idsOf,
  openQueueStore,
  queueOf,
  settlement,
  type QueueStore,
} from './queue-fixtures.js';

describe.each(STORE_KINDS)('endpoint queues on %s', (kind) => {
  let store: QueueStore;
  beforeEach(async () => {
    store = await openQueueStore(kind);
  });
  afterEach(async () => {
    await store.close();
  });

  /** Settles one endpoint's queue. */
  const settle = (
    db: Db,
    endpointId: string,
    s: Partial<Omit<QueueSettlement, 'endpoint_id'>>,
    now: number,
    ceiling = CEILING,
  ) => settleQueues(db, [settlement(endpointId, s)], ceiling, now);

  /** Limit, credit and threshold of a queue. */
  const adaptive = async (db: Db, endpointId: string) => {
    const q = await queueOf(db, endpointId);
    return [q.concurrency_limit, q.concurrency_credit, q.slow_start_threshold];
  };

  describe('settleQueues', () => {
    it('lowers in_flight by the finished attempts, never below zero', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await addDeliveries(db, 'ep-a', dueTimes(5));
      expect(await claimAt(db, T0, 3)).toHaveLength(3);
      await settle(db, 'ep-a', { finished: 2 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 1, queued: 2 });
      await settle(db, 'ep-a', { finished: 5 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 0, queued: 2 });
    });

    it('settles many endpoints in one statement, each by its own counts', async () => {
      // A flush across many endpoints: one statement joins each item to its queue row.
      const { db } = store;
      const ids = Array.from({ length: 40 }, (_, i) => `ep-${String(i).padStart(2, '0')}`);
      for (const id of ids) {
        await addEndpoint(db, id);
        await addDeliveries(db, id, dueTimes(4));
      }
      expect(await claimAt(db, T0, 4 * ids.length)).toHaveLength(4 * ids.length);
      await settleQueues(
        db,
        ids.map((id, i) => settlement(id, { finished: i % 5 })),
        CEILING,
        T0,
      );
      for (const [i, id] of ids.entries()) {
        expect(await queueOf(db, id)).toMatchObject({ in_flight: 4 - Math.min(4, i % 5) });
      }
    });

    it('counts retries back in and brings next_due_at forward only when earlier', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await addEndpoint(db, 'ep-empty');
      await addDeliveries(db, 'ep-a', [T0 + 500, T0 + 600]);
      await settle(db, 'ep-a', { requeued: 1, requeuedDue: T0 + 700 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({
        queued: 3,
        next_due_at: T0 + 500,
        ready_at: T0 + 500,
      });
      await settle(db, 'ep-a', { requeued: 2, requeuedDue: T0 + 100 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({
        queued: 5,
        next_due_at: T0 + 100,
        ready_at: T0 + 100,
      });
      await settle(db, 'ep-a', { finished: 1, fast: 1 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ queued: 5, next_due_at: T0 + 100 });
      expect(await queueOf(db, 'ep-empty')).toMatchObject({ queued: 0, next_due_at: null, ready_at: null });
      await settle(db, 'ep-empty', { requeued: 1, requeuedDue: T0 + 50 }, T0);
      expect(await queueOf(db, 'ep-empty')).toMatchObject({
        queued: 1,
        next_due_at: T0 + 50,
        ready_at: T0 + 50,
      });
    });

    it('in slow start adds each fast success to the limit, up to the ceiling and the threshold', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      expect(await adaptive(db, 'ep-a')).toEqual([INITIAL_CONCURRENCY, 0, INITIAL_SLOW_START_THRESHOLD]);
      await settle(db, 'ep-a', { fast: 5 }, T0, 32);
      expect(await adaptive(db, 'ep-a')).toEqual([13, 0, INITIAL_SLOW_START_THRESHOLD]);
      await settle(db, 'ep-a', { fast: 100 }, T0, 32);
      expect(await adaptive(db, 'ep-a')).toEqual([32, 0, INITIAL_SLOW_START_THRESHOLD]);
      // Congestion sets the threshold at 16; a lower ceiling then takes the limit below it.
      await settle(db, 'ep-a', { congested: true }, T0, 32);
      expect(await adaptive(db, 'ep-a')).toEqual([16, 0, 16]);
      await settle(db, 'ep-a', {}, T0, 6);
      expect(await adaptive(db, 'ep-a')).toEqual([6, 0, 16]);
      await settle(db, 'ep-a', { fast: 50 }, T0, 32);
      expect(await adaptive(db, 'ep-a')).toEqual([16, 0, 16]);
    });

    it('halves the limit on congestion, at most once per DECREASE_INTERVAL_MS, never below 1', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await settle(db, 'ep-a', { fast: 12 }, T0);
      expect(await adaptive(db, 'ep-a')).toEqual([20, 0, INITIAL_SLOW_START_THRESHOLD]);
      // Fast successes in the same flush do not outweigh the congestion.
      await settle(db, 'ep-a', { congested: true, fast: 3 }, T0);
      expect(await adaptive(db, 'ep-a')).toEqual([10, 0, 10]);
      expect((await queueOf(db, 'ep-a')).last_decrease_at).toBe(T0);
      // More reports of the same congestion within the interval change nothing.
      await settle(db, 'ep-a', { congested: true }, T0 + DECREASE_INTERVAL_MS - 1);
      expect(await adaptive(db, 'ep-a')).toEqual([10, 0, 10]);
      expect((await queueOf(db, 'ep-a')).last_decrease_at).toBe(T0);
      let at = T0 + DECREASE_INTERVAL_MS;
      for (const expected of [5, 2, 1, 1]) {
        await settle(db, 'ep-a', { congested: true }, at);
        expect(await adaptive(db, 'ep-a')).toEqual([expected, 0, expected]);
        expect((await queueOf(db, 'ep-a')).last_decrease_at).toBe(at);
        at += DECREASE_INTERVAL_MS;
      }
    });

    it("above the threshold grows the limit by one per limit's worth of fast successes", async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await settle(db, 'ep-a', { congested: true }, T0);
      expect(await adaptive(db, 'ep-a')).toEqual([4, 0, 4]);
      await settle(db, 'ep-a', { fast: 3 }, T0 + 10);
      expect(await adaptive(db, 'ep-a')).toEqual([4, 3, 4]);
      await settle(db, 'ep-a', { fast: 3 }, T0 + 20);
      expect(await adaptive(db, 'ep-a')).toEqual([5, 2, 4]);
      await settle(db, 'ep-a', { fast: 3 }, T0 + 30);
      expect(await adaptive(db, 'ep-a')).toEqual([6, 0, 4]);
      await settle(db, 'ep-a', { fast: 5 }, T0 + 40);
      expect(await adaptive(db, 'ep-a')).toEqual([6, 5, 4]);
      await settle(db, 'ep-a', { fast: 1 }, T0 + 50);
      expect(await adaptive(db, 'ep-a')).toEqual([7, 0, 4]);
      await settle(db, 'ep-a', { fast: 7 }, T0 + 60, 7);
      expect(await adaptive(db, 'ep-a')).toEqual([7, 0, 4]);
      // Congestion after the interval clears the credit along with the halving.
      await settle(db, 'ep-a', { fast: 4 }, T0 + 70);
      expect(await adaptive(db, 'ep-a')).toEqual([7, 4, 4]);
      await settle(db, 'ep-a', { congested: true }, T0 + DECREASE_INTERVAL_MS);
      expect(await adaptive(db, 'ep-a')).toEqual([3, 0, 3]);
    });

    it('keeps the credit through a flush without fast successes', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await settle(db, 'ep-a', { congested: true }, T0);
      // One flush of 20 fast successes at limit 4: one step up, 16 carried over.
      await settle(db, 'ep-a', { finished: 0, fast: 20 }, T0 + 10);
      expect(await adaptive(db, 'ep-a')).toEqual([5, 16, 4]);
      // A flush of slow or 4xx answers is neither a reason to grow nor to spend the credit.
      await settle(db, 'ep-a', { fast: 0 }, T0 + 20);
      expect(await adaptive(db, 'ep-a')).toEqual([5, 16, 4]);
    });

    /**
     * Flushes of a subscriber whose answer time is `base + perInFlight × n` for the n-th request in
     * flight, with every slot of the limit in use: each flush answers `limit` requests, 100 ms apart.
     * Answers the limits seen after each flush.
     */
    const simulate = async (
      db: Db,
      o: { flushes: number; base: number; perInFlight: number; failEvery?: number; from?: number },
      ceiling: number,
    ) => {
      const limits: number[] = [];
      for (let i = o.from ?? 0; i < (o.from ?? 0) + o.flushes; i++) {
        const limit = (await queueOf(db, 'ep-a')).concurrency_limit;
        const times = Array.from({ length: limit }, (_, n) => o.base + o.perInFlight * (n + 1));
        // Every failEvery-th answer is a fast 500: an answer, but neither a success nor congestion.
        const failed = o.failEvery ? times.filter((_, n) => (i * limit + n) % o.failEvery! === 0).length : 0;
        await settle(
          db,
          'ep-a',
          {
            finished: limit,
            fast: limit - failed,
            answers: limit,
            answerMsSum: times.reduce((a, b) => a + b, 0),
            answerMsMin: Math.min(...times),
          },
          T0 + i * 100,
          ceiling,
        );
        limits.push((await queueOf(db, 'ep-a')).concurrency_limit);
      }
      return limits;
    };

    it('answers slowing as more are in flight bring the limit down, and it settles where they stop', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      // 2 ms plus 10 ms per request in flight: without a queue a request takes 12 ms, which the floor
      // learns; the limit grows from 8 while the mean answer (2 + 10 (L + 1) / 2 ms) stays within
      // twice the floor plus the slack (74 ms), and settles there: L ≈ 13.
      const limits = await simulate(db, { flushes: 60, base: 2, perInFlight: 10 }, 64);
      const q = await queueOf(db, 'ep-a');
      expect(q.answer_ms_floor).toBeCloseTo(12, 0);
      expect(q.slow_start_threshold).toBeLessThan(INITIAL_SLOW_START_THRESHOLD);
      expect(Math.max(...limits)).toBeGreaterThan(INITIAL_CONCURRENCY);
      expect(Math.max(...limits.slice(-40))).toBeLessThanOrEqual(16);
      expect(Math.min(...limits.slice(-40))).toBeGreaterThanOrEqual(10);
    });

    it('a subscriber that starts queueing brings a limit at its ceiling down within seconds', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      // Quick at any load (1-3 ms): the limit goes to the ceiling…
      const quick = await simulate(db, { flushes: 20, base: 1, perInFlight: 0.03 }, 64);
      expect(quick.at(-1)).toBe(64);
      // …then each request in flight costs 10 ms more: cut at most once a second, at most by half
      // (64 → 32 → 16 → …), then held where the answers are within the allowance (2 × ~1 ms + 50 ms).
      const slow = await simulate(db, { flushes: 80, base: 2, perInFlight: 10, from: 20 }, 64);
      expect(slow.slice(0, 9).every((l) => l >= 32)).toBe(true);
      expect(Math.max(...slow.slice(-40))).toBeLessThanOrEqual(10);
      expect(Math.min(...slow.slice(-40))).toBeGreaterThanOrEqual(6);
      // The stored figures say why: the recent answer time is near the allowance, the floor quick.
      const q = await queueOf(db, 'ep-a');
      expect(q.answer_ms_floor!).toBeLessThan(2);
      expect(q.answer_ms_recent!).toBeLessThan(60);
    });

    it('a moment of slow answers (the worker paused) leaves the limit; slow answers that last cut it', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      const answers = (count: number, ms: number) => ({
        finished: count,
        fast: count,
        answers: count,
        answerMsSum: count * ms,
        answerMsMin: ms,
      });
      await settle(db, 'ep-a', answers(12, 2), T0);
      expect(await adaptive(db, 'ep-a')).toEqual([20, 0, INITIAL_SLOW_START_THRESHOLD]);
      // Every answer of one moment took 200 ms: slow, but not for long. No growth, no cut.
      await settle(db, 'ep-a', answers(8, 200), T0 + 100);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ concurrency_limit: 20, answer_slow_since: T0 + 100 });
      await settle(db, 'ep-a', answers(8, 2), T0 + 700);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ concurrency_limit: 28, answer_slow_since: null });
      // Slow from T0 + 1000 on: cut once it has lasted QUEUEING_PERSIST_MS, to the allowance's share.
      await settle(db, 'ep-a', answers(8, 200), T0 + 1000);
      await settle(db, 'ep-a', answers(8, 200), T0 + 1000 + QUEUEING_PERSIST_MS - 1);
      expect(await adaptive(db, 'ep-a')).toEqual([28, 0, INITIAL_SLOW_START_THRESHOLD]);
      await settle(db, 'ep-a', answers(8, 200), T0 + 1000 + QUEUEING_PERSIST_MS);
      // Allowance 2 × 2 ms + 50 ms = 54 ms of 200: more than halved, so halved.
      expect(await adaptive(db, 'ep-a')).toEqual([14, 0, 14]);
    });

    it('quick answers keep the limit growing to the ceiling, fast 500s among them', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      // A subscriber answering in 1-3 ms whatever the load, one answer in ten a 500.
      const limits = await simulate(db, { flushes: 40, base: 1, perInFlight: 0.03, failEvery: 10 }, 64);
      expect(limits.at(-1)).toBe(64);
      expect((await queueOf(db, 'ep-a')).slow_start_threshold).toBe(INITIAL_SLOW_START_THRESHOLD);
    });

    it('pauses until the later of the old and the new pause', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await addDeliveries(db, 'ep-a', dueTimes(1, T0 - 100));
      await settle(db, 'ep-a', { pauseUntil: T0 + 5000 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ paused_until: T0 + 5000, ready_at: T0 + 5000 });
      await settle(db, 'ep-a', { pauseUntil: T0 + 3000 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ paused_until: T0 + 5000 });
      await settle(db, 'ep-a', { pauseUntil: T0 + 8000 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ paused_until: T0 + 8000, ready_at: T0 + 8000 });
      await settle(db, 'ep-a', { pauseUntil: null }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ paused_until: T0 + 8000 });
      await pauseQueues(db, [{ endpoint_id: 'ep-a', until: T0 + 7000 }]);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ paused_until: T0 + 8000 });
      await pauseQueues(db, [{ endpoint_id: 'ep-a', until: T0 + 9000 }]);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ paused_until: T0 + 9000, ready_at: T0 + 9000 });
    });

    it('takes ready_at away while in_flight is at the limit and gives it back when it drops', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await addDeliveries(db, 'ep-a', dueTimes(10, T0 - 100));
      expect(await claimAt(db, T0)).toHaveLength(8);
      expect(await queueOf(db, 'ep-a')).toMatchObject({
        in_flight: 8,
        next_due_at: T0 - 100,
        ready_at: null,
      });
      await settle(db, 'ep-a', { finished: 1 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 7, ready_at: T0 - 100 });
      // Halved to 4 with 6 in flight: no room until two more finish.
      await settle(db, 'ep-a', { finished: 1, congested: true }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 6, concurrency_limit: 4, ready_at: null });
      await settle(db, 'ep-a', { finished: 2 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 4, ready_at: null });
      await settle(db, 'ep-a', { finished: 1 }, T0);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 3, ready_at: T0 - 100 });
      expect(await claimAt(db, T0)).toHaveLength(1);
    });
  });

  it('enqueue creates a missing queue row, adds the counts and keeps the earliest due time', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    await db.run('DELETE FROM endpoint_queues');
    await enqueue(db, [{ endpoint_id: 'ep-a', count: 3, due: T0 + 50 }]);
    expect(await queueOf(db, 'ep-a')).toMatchObject({ active: 1, queued: 3, next_due_at: T0 + 50 });
    await enqueue(db, [{ endpoint_id: 'ep-a', count: 2, due: T0 + 80 }]);
    expect(await queueOf(db, 'ep-a')).toMatchObject({ queued: 5, next_due_at: T0 + 50 });
    await enqueue(db, [{ endpoint_id: 'ep-a', count: 1, due: T0 + 10 }]);
    expect(await queueOf(db, 'ep-a')).toMatchObject({ queued: 6, next_due_at: T0 + 10 });
  });

  it('setQueueActive stops a queue, and starting it again is a fresh start', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    await addEndpoint(db, 'ep-empty');
    await addDeliveries(db, 'ep-a', dueTimes(3, T0 - 100));
    await settle(
      db,
      'ep-a',
      { congested: true, pauseUntil: T0 + 60_000, answers: 1, answerMsSum: 40, answerMsMin: 40 },
      T0,
    );
    expect(await queueOf(db, 'ep-a')).toMatchObject({ answer_ms_recent: 40, answer_ms_floor: 40 });
    await setQueueActive(db, 'ep-a', false, T0);
    expect(await queueOf(db, 'ep-a')).toMatchObject({ active: 0, queued: 3, ready_at: null });
    await setQueueActive(db, 'ep-a', true, T0 + 10);
    expect(await queueOf(db, 'ep-a')).toEqual({
      active: 1,
      queued: 3,
      next_due_at: T0 + 10,
      in_flight: 0,
      concurrency_limit: INITIAL_CONCURRENCY,
      concurrency_credit: 0,
      slow_start_threshold: INITIAL_SLOW_START_THRESHOLD,
      last_decrease_at: null,
      // The subscriber may have changed while its endpoint was off: its answer times are learnt anew.
      answer_ms_recent: null,
      answer_ms_floor: null,
      answer_slow_since: null,
      paused_until: null,
      rate_interval_us: null,
      rate_tolerance_us: null,
      rate_tat_us: null,
      throttled_until: null,
      ready_at: T0 + 10,
    });
    expect(await claimAt(db, T0 + 10)).toHaveLength(3);
    await setQueueActive(db, 'ep-empty', false, T0);
    await setQueueActive(db, 'ep-empty', true, T0 + 10);
    expect(await queueOf(db, 'ep-empty')).toMatchObject({ active: 1, next_due_at: null, ready_at: null });
  });

  describe('reconcileInFlight', () => {
    it('brings a corrupted in_flight back to the deliveries being delivered', async () => {
      const { db } = store;
      for (const id of ['ep-a', 'ep-b', 'ep-c']) {
        await addEndpoint(db, id);
        await addDeliveries(db, id, dueTimes(5));
      }
      expect(await claimAt(db, T0, 100)).toHaveLength(15);
      const back = ['ep-a-d00000', 'ep-a-d00001'].map((id) => ({ id, attempt: 1, endpoint_id: 'ep-a' }));
      expect(await db.transaction((tx) => releaseDeliveries(tx, back, T0, CEILING))).toBe(2);
      // ep-a: 3 delivering, counted as 8 (stuck at its limit); ep-b: 5 delivering, counted as 1.
      await db.run(`UPDATE endpoint_queues SET in_flight = 8 WHERE endpoint_id = 'ep-a'`);
      await db.run(`UPDATE endpoint_queues SET in_flight = 1 WHERE endpoint_id = 'ep-b'`);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 8, ready_at: null });

      expect(await db.transaction((tx) => reconcileInFlight(tx))).toBe(2);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 3, ready_at: T0 });
      expect(await queueOf(db, 'ep-b')).toMatchObject({ in_flight: 5 });
      expect(await queueOf(db, 'ep-c')).toMatchObject({ in_flight: 5 });
      expect(await db.transaction((tx) => reconcileInFlight(tx))).toBe(0);
      expect(await claimAt(db, T0, 100)).toHaveLength(2);
    });

    it('also restores an in_flight that was reset to zero while attempts are out', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await addDeliveries(db, 'ep-a', dueTimes(12));
      expect(await claimAt(db, T0, 100)).toHaveLength(8);
      await db.run(`UPDATE endpoint_queues SET in_flight = 0 WHERE endpoint_id = 'ep-a'`);
      await db.transaction((tx) => reconcileInFlight(tx));
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 8, ready_at: null });
      // Otherwise the endpoint would be given 8 more attempts on top of the 8 still out.
      expect(await claimAt(db, T0, 100)).toEqual([]);
    });

    it.runIf(kind === 'postgres')(
      'locks no queue row when every count is right: claims and flushes are not held off it',
      async () => {
        const { db } = store;
        for (const id of ['ep-a', 'ep-b']) {
          await addEndpoint(db, id);
          await addDeliveries(db, id, dueTimes(5));
        }
        expect(await claimAt(db, T0, 100)).toHaveLength(10);
        // A row lock leaves the locker's transaction id in xmax, even when nothing is written.
        const xmax = () => db.all<{ xmax: string }>('SELECT xmax::text AS xmax FROM endpoint_queues');
        const before = await xmax();
        expect(await db.transaction((tx) => reconcileInFlight(tx))).toBe(0);
        expect(await xmax()).toEqual(before);
      },
    );
  });

  describe('reconcileNextDue', () => {
    it('restores a next due time lost while deliveries wait, so claims find them again', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await addDeliveries(db, 'ep-a', [T0 - 1000, T0 - 500, T0 + 5000]);
      await db.run(`UPDATE endpoint_queues SET next_due_at = NULL WHERE endpoint_id = 'ep-a'`);
      expect(await claimAt(db, T0, 100)).toEqual([]);

      expect(await db.transaction((tx) => reconcileNextDue(tx))).toBe(1);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ next_due_at: T0 - 1000, ready_at: T0 - 1000 });
      expect(await claimAt(db, T0, 100)).toHaveLength(2);
      // Later than the earliest pending delivery (the one not due yet) is wrong too.
      await db.run(`UPDATE endpoint_queues SET next_due_at = $1 WHERE endpoint_id = 'ep-a'`, [T0 + 9000]);
      expect(await db.transaction((tx) => reconcileNextDue(tx))).toBe(1);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ next_due_at: T0 + 5000 });
      expect(await db.transaction((tx) => reconcileNextDue(tx))).toBe(0);
    });

    it('leaves alone a lower bound, a line waiting behind its head, and a disabled endpoint', async () => {
      const { db } = store;
      for (const id of ['ep-low', 'ep-line', 'ep-off']) await addEndpoint(db, id);
      await addDeliveries(db, 'ep-line', dueTimes(2), 'd', ['k', 'k']);
      expect(await claimAt(db, T0, 100)).toHaveLength(1);
      expect(await queueOf(db, 'ep-line')).toMatchObject({ queued: 1, next_due_at: null });
      await addDeliveries(db, 'ep-low', dueTimes(2));
      await db.run(`UPDATE endpoint_queues SET next_due_at = $1 WHERE endpoint_id = 'ep-low'`, [T0 - 9000]);
      await addDeliveries(db, 'ep-off', dueTimes(2));
      await setQueueActive(db, 'ep-off', false, T0);
      await db.run(`UPDATE endpoint_queues SET next_due_at = NULL WHERE endpoint_id = 'ep-off'`);

      expect(await db.transaction((tx) => reconcileNextDue(tx))).toBe(0);
      expect(await queueOf(db, 'ep-low')).toMatchObject({ queued: 2, next_due_at: T0 - 9000 });
      expect(await queueOf(db, 'ep-off')).toMatchObject({ active: 0, next_due_at: null });
    });
  });

  it('a saturated endpoint with a large backlog does not hold up a healthy one', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-saturated');
    await addDeliveries(db, 'ep-saturated', dueTimes(5000, T0 - 60_000));
    expect(await claimAt(db, T0, 100)).toHaveLength(INITIAL_CONCURRENCY);
    expect(await queueOf(db, 'ep-saturated')).toMatchObject({ in_flight: 8, queued: 4992, ready_at: null });
    await addEndpoint(db, 'ep-healthy');
    const healthy = await addDeliveries(db, 'ep-healthy', dueTimes(10, T0 - 1));
    // Earlier fast answers have already taken its adaptive limit past 10.
    await settle(db, 'ep-healthy', { fast: 8 }, T0);
    expect(await queueOf(db, 'ep-healthy')).toMatchObject({ concurrency_limit: 16 });
    // A batch of exactly 10: the older backlog takes none of it.
    expect(idsOf(await claimAt(db, T0, 10))).toEqual(healthy);
    expect(await claimAt(db, T0, 10)).toEqual([]);
    expect(await queueOf(db, 'ep-saturated')).toMatchObject({ in_flight: 8, queued: 4992 });
  });

  it('queueTotals and nextReadyAt agree with the rows', async () => {
    const { db } = store;
    for (const id of ['ep-busy', 'ep-due', 'ep-paused', 'ep-inactive', 'ep-future'])
      await addEndpoint(db, id);
    await addDeliveries(db, 'ep-busy', dueTimes(2, T0 - 500));
    expect(await claimAt(db, T0)).toHaveLength(2);
    await addDeliveries(db, 'ep-due', [T0 - 300, T0 - 200, T0 - 100]);
    await addDeliveries(db, 'ep-paused', dueTimes(2, T0 - 400));
    await addDeliveries(db, 'ep-inactive', dueTimes(1, T0 - 400));
    await addDeliveries(db, 'ep-future', dueTimes(2, T0 + 10_000));
    await pauseQueues(db, [{ endpoint_id: 'ep-paused', until: T0 + 5000 }]);
    await setQueueActive(db, 'ep-inactive', false, T0);

    const rows = async () => {
      const r = await db.one<{ pending: number | string; delivering: number | string }>(
        `SELECT SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END) AS pending,
           SUM(CASE WHEN status = 'delivering' THEN 1 ELSE 0 END) AS delivering FROM deliveries`,
      );
      return { pending: Number(r?.pending), delivering: Number(r?.delivering) };
    };
    expect(await rows()).toEqual({ pending: 8, delivering: 2 });
    expect(await queueTotals(db, T0)).toEqual({ due: 3, scheduled: 5, delivering: 2 });
    expect(await nextReadyAt(db)).toBe(T0 - 300);

    expect(await claimAt(db, T0)).toHaveLength(3);
    expect(await rows()).toEqual({ pending: 5, delivering: 5 });
    expect(await queueTotals(db, T0)).toEqual({ due: 0, scheduled: 5, delivering: 5 });
    expect(await nextReadyAt(db)).toBe(T0 + 5000);
    expect(await queueTotals(db, T0 + 5000)).toEqual({ due: 2, scheduled: 3, delivering: 5 });
    expect(await queueTotals(db, T0 + 10_000)).toEqual({ due: 4, scheduled: 1, delivering: 5 });
    await setQueueActive(db, 'ep-inactive', true, T0 + 10_000);
    expect(await queueTotals(db, T0 + 10_000)).toEqual({ due: 5, scheduled: 0, delivering: 5 });
  });

  it.runIf(kind === 'postgres')(
    'three pools claiming at once hand out exactly each endpoint’s limit, and no delivery twice',
    async () => {
      const { db } = store;
      const endpoints = ['ep-0', 'ep-1', 'ep-2', 'ep-3'];
      for (const id of endpoints) {
        await addEndpoint(db, id);
        await addDeliveries(db, id, dueTimes(50));
      }
      const claimers = [store.open(), store.open(), store.open()];
      const claimAll = async (now: number) => {
        const claimed: ClaimedAttempt[] = [];
        await Promise.all(
          claimers.map(async (c) => {
            // Every ready queue may be locked by another claimer for a moment: only several empty
            // answers in a row mean nothing is left within the limits.
            for (let empty = 0; empty < 5;) {
              const batch = await claimAt(c, now, 16);
              empty = batch.length === 0 ? empty + 1 : 0;
              claimed.push(...batch);
            }
          }),
        );
        return claimed;
      };
      const perEndpoint = (rows: ClaimedAttempt[]) =>
        endpoints.map((e) => rows.filter((r) => r.endpoint_id === e).length);

      const first = await claimAll(T0);
      expect(new Set(first.map((c) => c.id)).size).toBe(first.length);
      expect(perEndpoint(first)).toEqual([8, 8, 8, 8]);
      for (const e of endpoints) expect(await queueOf(db, e)).toMatchObject({ in_flight: 8, queued: 42 });

      const done = [
        ...first.filter((c) => c.endpoint_id === 'ep-0').slice(0, 3),
        ...first.filter((c) => c.endpoint_id === 'ep-1').slice(0, 5),
      ];
      await db.transaction(async (tx) => {
        const written = await completeDeliveries(
          tx,
          done.map((c) => ({ id: c.id, attempt: c.attempts, status: 200 })),
          T0 + 10,
        );
        expect(written).toHaveLength(8);
        await settleQueues(
          tx,
          [settlement('ep-0', { finished: 3 }), settlement('ep-1', { finished: 5 })],
          CEILING,
          T0 + 10,
        );
      });
      const second = await claimAll(T0 + 10);
      expect(perEndpoint(second)).toEqual([3, 5, 0, 0]);
      const all = [...first, ...second].map((c) => c.id);
      expect(new Set(all).size).toBe(all.length);
      for (const e of endpoints) expect(await queueOf(db, e)).toMatchObject({ in_flight: 8 });
    },
  );
});
