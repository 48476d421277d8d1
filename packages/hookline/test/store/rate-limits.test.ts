// Endpoint rate limits in the claim, on both stores (docs/architecture.md, "Rate limits"): claims take
// no more than the pace allows, in any one-second window, whoever claims; a throttled endpoint is not
// ready until its next slot; removing the limit frees it at once.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { completeDeliveries } from '../../src/store/deliveries.js';
import {
  paceLateCreditUs,
  pacedSendDelayUs,
  ratePace,
  setQueueRate,
  settleQueues,
} from '../../src/store/endpoint-queues.js';
import { busiestSecond } from '../delivery/ordering-support.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  CEILING,
  T0,
  addDeliveries,
  addEndpoint,
  claimAt,
  dueTimes,
  openQueueStore,
  queueOf,
  settlement,
  type QueueStore,
} from './queue-fixtures.js';

/** Claim times, one claim every `stepMs` from T0 for `durationMs`, finishing each attempt at once. */
async function claimEvery(
  store: QueueStore,
  stepMs: number,
  durationMs: number,
  dbs = [store.db],
): Promise<number[]> {
  const times: number[] = [];
  for (let now = T0, i = 0; now < T0 + durationMs; now += stepMs, i++) {
    const db = dbs[i % dbs.length]!;
    const claimed = await claimAt(db, now, 100);
    for (const _ of claimed) times.push(now);
    if (claimed.length > 0) {
      // Finished at once: only the rate limit holds the endpoint back, never the concurrency limit.
      await db.transaction(async (tx) => {
        await completeDeliveries(
          tx,
          claimed.map((c) => ({ id: c.id, attempt: c.attempts, status: 200 })),
          now,
        );
        await settleQueues(tx, [settlement('ep-a', { finished: claimed.length })], CEILING, now);
      });
    }
  }
  return times;
}

describe.each(STORE_KINDS)('endpoint rate limits on %s', (kind) => {
  let store: QueueStore;
  beforeEach(async () => {
    store = await openQueueStore(kind);
  });
  afterEach(async () => {
    await store.close();
  });

  it('paces claims just under the limit: never more in any one-second window, nearly as many', async () => {
    await addEndpoint(store.db, 'ep-a');
    await addDeliveries(store.db, 'ep-a', dueTimes(200));
    await setQueueRate(store.db, 'ep-a', 20);
    const times = await claimEvery(store, 4, 3000);
    expect(busiestSecond(times)).toBeLessThanOrEqual(20);
    // 4 % under the limit by design: over three seconds 57 or 58 attempts.
    expect(times.length).toBeGreaterThanOrEqual(57);
  });

  it('holds across connections claiming in turn (two workers on PostgreSQL)', async () => {
    await addEndpoint(store.db, 'ep-a');
    await addDeliveries(store.db, 'ep-a', dueTimes(200));
    await setQueueRate(store.db, 'ep-a', 20);
    const times = await claimEvery(store, 3, 2000, [store.db, store.open()]);
    expect(busiestSecond(times)).toBeLessThanOrEqual(20);
    expect(times.length).toBeGreaterThanOrEqual(38);
  });

  it('a throttled endpoint is not ready until its next slot; a claim takes what fits in the pace', async () => {
    await addEndpoint(store.db, 'ep-a');
    await addDeliveries(store.db, 'ep-a', dueTimes(100));
    await setQueueRate(store.db, 'ep-a', 100);
    const { intervalUs, toleranceUs } = ratePace(100);
    // A queue fresh to its limit resumes the pace as far back as a late claim may: slots from there to
    // now + tolerance.
    const from = T0 * 1000 - paceLateCreditUs(intervalUs);
    const burst = Math.floor((T0 * 1000 + toleranceUs - from) / intervalUs) + 1;
    expect(burst).toBe(3);
    const claimed = await claimAt(store.db, T0, 100);
    expect(claimed).toHaveLength(burst);
    // Each is sent at its slot plus the send delay, one interval apart, in the order they were due
    // (equal due times: in the order of their ids).
    const sendAt = [...claimed].sort((a, b) => (a.id < b.id ? -1 : 1)).map((c) => Number(c.send_at));
    expect(sendAt).toEqual(
      [0, 1, 2].map((i) => Math.floor((from + i * intervalUs + pacedSendDelayUs(intervalUs)) / 1000)),
    );
    const queue = await queueOf(store.db, 'ep-a');
    expect(queue.rate_tat_us).toBe(from + burst * intervalUs);
    expect(queue.throttled_until).toBe(Math.ceil((queue.rate_tat_us! - toleranceUs) / 1000));
    expect(queue.ready_at).toBe(queue.throttled_until);
    expect(await claimAt(store.db, queue.throttled_until! - 1, 100)).toEqual([]);
    expect(await claimAt(store.db, queue.throttled_until!, 100)).toHaveLength(1);
  });

  it('removing the limit frees the endpoint at once', async () => {
    await addEndpoint(store.db, 'ep-a');
    await addDeliveries(store.db, 'ep-a', dueTimes(20));
    await setQueueRate(store.db, 'ep-a', 1);
    expect(await claimAt(store.db, T0, 100)).toHaveLength(1);
    expect(await claimAt(store.db, T0 + 1, 100)).toEqual([]);
    await setQueueRate(store.db, 'ep-a', null);
    // Seven: the one claimed before is still in flight, and the adaptive limit starts at eight.
    expect(await claimAt(store.db, T0 + 1, 100)).toHaveLength(7);
  });
});
