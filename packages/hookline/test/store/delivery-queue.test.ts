// The delivery transitions of store/deliveries.ts, on both stores, with rows written directly and
// explicit times: what a claim takes and what it leaves the queue saying, the attempt-number fence
// of every outcome (pg-boss's "fencing tests"), release at shutdown, the lease reaper (which must skip
// rows another transaction holds on PostgreSQL), and cancelling a deleted endpoint's backlog.
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  cancelForEndpoint,
  completeDeliveries,
  recordSuccesses,
  recordSuccessesThenClaim,
  failDeliveries,
  reapExpiredLeases,
  releaseDeliveries,
  sweepDeletedEndpoints,
} from '../../src/store/deliveries.js';
import { pauseQueues, setQueueActive, settleQueues } from '../../src/store/endpoint-queues.js';
import { ENDPOINTS_PER_CLAIM } from '../../src/store/sqlite/claim.js';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';
import {
  CEILING,
  LEASE_MS,
  T0,
  addDeliveries,
  addEndpoint,
  claimAt,
  deliveriesOf,
  dueTimes,
  idsOf,
  openQueueStore,
  payloadOf,
  queueOf,
  settlement,
  statusCounts,
  type QueueStore,
} from './queue-fixtures.js';

describe.each(STORE_KINDS)('delivery queue transitions on %s', (kind) => {
  let store: QueueStore;
  beforeEach(async () => {
    store = await openQueueStore(kind);
  });
  afterEach(async () => {
    await store.close();
  });

  describe('claim', () => {
    it('takes only due deliveries, oldest first, counting the attempt and taking the lease', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      // Inserted out of due order; d3 falls due one millisecond after the claims below.
      const [d0, d1, d2, d3, d4] = await addDeliveries(db, 'ep-a', [
        T0 - 100,
        T0 - 300,
        T0,
        T0 + 1,
        T0 - 200,
      ]);
      const first = await claimAt(db, T0, 2);
      expect(idsOf(first)).toEqual([d1, d4]);
      expect(first.map((c) => c.attempts)).toEqual([1, 1]);
      const second = await claimAt(db, T0, 100);
      expect(idsOf(second)).toEqual([d0, d2]);
      expect(await claimAt(db, T0, 100)).toEqual([]);
      const rows = await deliveriesOf(db, [d0!, d1!, d2!, d3!, d4!]);
      expect(rows.map((r) => [r.status, r.attempts, r.lease_expires_at])).toEqual([
        ['delivering', 1, T0 + LEASE_MS],
        ['delivering', 1, T0 + LEASE_MS],
        ['delivering', 1, T0 + LEASE_MS],
        ['pending', 0, null],
        ['delivering', 1, T0 + LEASE_MS],
      ]);
      expect(idsOf(await claimAt(db, T0 + 1, 100))).toEqual([d3]);
    });

    it('answers what the attempt needs: the payload, the URL and the secrets', async () => {
      const { db } = store;
      const a = await addEndpoint(db, 'ep-a');
      const b = await addEndpoint(db, 'ep-b');
      await addDeliveries(db, a.id, dueTimes(2));
      await addDeliveries(db, b.id, dueTimes(1));
      const claimed = await claimAt(db, T0);
      expect(claimed).toHaveLength(3);
      for (const c of claimed) {
        const e = c.endpoint_id === a.id ? a : b;
        expect(c).toMatchObject({
          message_id: `msg-${c.id}`,
          tenant_id: 'acme',
          event_type: 'user.updated',
          attempts: 1,
          first_headers: null,
          replay_of: null,
          url: e.url,
          previous_secret: null,
          previous_secret_expires_at: null,
        });
        expect(Buffer.from(c.payload)).toEqual(payloadOf(c.id));
        expect(Buffer.from(c.secret)).toEqual(e.secret);
      }
    });

    it('respects the batch limit across endpoints, and each endpoint gives its oldest', async () => {
      const { db } = store;
      const all: string[][] = [];
      for (const id of ['ep-a', 'ep-b', 'ep-c']) {
        await addEndpoint(db, id);
        all.push(await addDeliveries(db, id, [T0 - 50, T0 - 40, T0 - 30, T0 - 20, T0 - 10]));
      }
      const first = await claimAt(db, T0, 7);
      expect(first).toHaveLength(7);
      for (const ids of all) {
        const taken = ids.filter((id) => first.some((c) => c.id === id));
        expect(taken).toEqual(ids.slice(0, taken.length)); // a prefix in due order
      }
      const queues = await Promise.all(['ep-a', 'ep-b', 'ep-c'].map((id) => queueOf(db, id)));
      expect(queues.reduce((n, q) => n + q.in_flight, 0)).toBe(7);
      expect(queues.reduce((n, q) => n + q.queued, 0)).toBe(8);
      const rest = await claimAt(db, T0, 100);
      expect([...idsOf(first), ...idsOf(rest)].sort()).toEqual(all.flat().sort());
    });

    it.runIf(kind === 'sqlite')(
      'takes from at most ENDPOINTS_PER_CLAIM endpoints per transaction, and goes on in the next (SQLite)',
      async () => {
        const { db } = store;
        const endpoints = Array.from({ length: ENDPOINTS_PER_CLAIM + 8 }, (_, i) => `ep-${1000 + i}`);
        for (const [i, id] of endpoints.entries()) {
          await addEndpoint(db, id);
          // Endpoint i's one delivery fell due at T0 − 1000 + i: the queues are ready in that order.
          await addDeliveries(db, id, [T0 - 1000 + i]);
        }
        // In two transactions (the API may write in between), but one claim: it takes from them all.
        const transactions: number[] = [];
        const transaction = db.transaction.bind(db);
        db.transaction = (fn) => (transactions.push(1), transaction(fn));
        const limit = ENDPOINTS_PER_CLAIM + 3;
        const claimed = await claimAt(db, T0, limit);
        expect(transactions).toHaveLength(2);
        // The batch limit holds across them, and the queues that waited longest go first.
        expect(claimed.map((c) => c.endpoint_id).sort()).toEqual(endpoints.slice(0, limit));
        const rest = await claimAt(db, T0, 500);
        expect(rest.map((c) => c.endpoint_id).sort()).toEqual(endpoints.slice(limit));
      },
    );

    it('takes at most min(concurrency_limit, ceiling) − in_flight from an endpoint', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await addEndpoint(db, 'ep-b');
      await addDeliveries(db, 'ep-a', dueTimes(20));
      await addDeliveries(db, 'ep-b', dueTimes(20));
      // ep-a: its adaptive limit (8 to start with) under a high ceiling.
      const a = await claimAt(db, T0, 100);
      expect(a.filter((c) => c.endpoint_id === 'ep-a')).toHaveLength(8);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 8, queued: 12, ready_at: null });
      // ep-b gave 8 too; bring it back to 2 in flight to try the ceiling.
      const fromB = a.filter((c) => c.endpoint_id === 'ep-b');
      expect(fromB).toHaveLength(8);
      const giveBack = fromB.slice(0, 6).map((c) => ({ id: c.id, attempt: 1, endpoint_id: c.endpoint_id }));
      expect(await db.transaction((tx) => releaseDeliveries(tx, giveBack, T0, CEILING))).toBe(6);
      expect(await queueOf(db, 'ep-b')).toMatchObject({ in_flight: 2, queued: 18 });
      // A ceiling of 5 leaves room for 3, and lowers the queue's limit to it.
      const b = await claimAt(db, T0, 100, { ceiling: 5 });
      expect(b.map((c) => c.endpoint_id)).toEqual(['ep-b', 'ep-b', 'ep-b']);
      expect(await queueOf(db, 'ep-b')).toMatchObject({
        in_flight: 5,
        queued: 15,
        concurrency_limit: 5,
        ready_at: null,
      });
      expect(await claimAt(db, T0, 100, { ceiling: 5 })).toEqual([]);
      // Below its own limit but not below a lower ceiling: nothing to take, and the claim lowers the
      // limit, so the queue leaves the ready ones with its next due time kept.
      const giveBackA = a.filter((c) => c.endpoint_id === 'ep-a').slice(0, 3);
      const released = giveBackA.map((c) => ({ id: c.id, attempt: 1, endpoint_id: c.endpoint_id }));
      expect(await db.transaction((tx) => releaseDeliveries(tx, released, T0, CEILING))).toBe(3);
      expect(await queueOf(db, 'ep-a')).toMatchObject({
        in_flight: 5,
        concurrency_limit: 8,
        ready_at: T0 - 1000,
      });
      expect(await claimAt(db, T0, 100, { ceiling: 4 })).toEqual([]);
      expect(await queueOf(db, 'ep-a')).toMatchObject({
        in_flight: 5,
        concurrency_limit: 4,
        next_due_at: T0 - 1000,
        ready_at: null,
      });
    });

    it('skips paused, inactive and saturated endpoints', async () => {
      const { db } = store;
      for (const id of ['ep-paused', 'ep-inactive', 'ep-saturated', 'ep-healthy']) await addEndpoint(db, id);
      const saturated = await addDeliveries(db, 'ep-saturated', dueTimes(10, T0 - 5000));
      expect(await claimAt(db, T0, 100)).toHaveLength(8);
      const paused = await addDeliveries(db, 'ep-paused', dueTimes(3, T0 - 3000));
      const inactive = await addDeliveries(db, 'ep-inactive', dueTimes(3, T0 - 3000));
      const healthy = await addDeliveries(db, 'ep-healthy', dueTimes(3, T0 - 1000));
      await pauseQueues(db, [{ endpoint_id: 'ep-paused', until: T0 + 5000 }]);
      await setQueueActive(db, 'ep-inactive', false, T0);

      expect(idsOf(await claimAt(db, T0, 100))).toEqual(healthy);
      expect(await claimAt(db, T0 + 4999, 100)).toEqual([]);
      // A pause ends at paused_until itself.
      expect(idsOf(await claimAt(db, T0 + 5000, 100))).toEqual(paused);
      await setQueueActive(db, 'ep-inactive', true, T0 + 5000);
      expect(idsOf(await claimAt(db, T0 + 5000, 100))).toEqual(inactive);
      expect(await claimAt(db, T0 + 6000, 100)).toEqual([]);
      expect(await statusCounts(db, 'ep-saturated')).toEqual({ delivering: 8, pending: 2 });
      expect((await deliveriesOf(db, saturated.slice(8))).map((r) => r.status)).toEqual([
        'pending',
        'pending',
      ]);
    });

    it('keeps the queue in step: in_flight, queued and next_due_at', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      const ids = await addDeliveries(db, 'ep-a', [T0 - 30, T0 - 20, T0 - 10, T0 + 100, T0 + 200]);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ queued: 5, in_flight: 0, next_due_at: T0 - 30 });
      expect(idsOf(await claimAt(db, T0))).toEqual(ids.slice(0, 3));
      expect(await queueOf(db, 'ep-a')).toMatchObject({
        queued: 2,
        in_flight: 3,
        next_due_at: T0 + 100,
        ready_at: T0 + 100,
      });
      expect(await claimAt(db, T0 + 99)).toEqual([]);
      expect(idsOf(await claimAt(db, T0 + 100))).toEqual([ids[3]]);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ queued: 1, in_flight: 4, next_due_at: T0 + 200 });
      expect(idsOf(await claimAt(db, T0 + 500))).toEqual([ids[4]]);
      expect(await queueOf(db, 'ep-a')).toMatchObject({
        queued: 0,
        in_flight: 5,
        next_due_at: null,
        ready_at: null,
      });
    });

    it('corrects a stale next_due_at to NULL without holding up other endpoints', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-stale');
      await addEndpoint(db, 'ep-live');
      // The stale queue is ready first, yet has no pending delivery at all.
      await db.run('UPDATE endpoint_queues SET next_due_at = $1 WHERE endpoint_id = $2', [
        T0 - 9000,
        'ep-stale',
      ]);
      const live = await addDeliveries(db, 'ep-live', dueTimes(4, T0 - 100));
      expect(await queueOf(db, 'ep-stale')).toMatchObject({ ready_at: T0 - 9000 });
      expect(idsOf(await claimAt(db, T0, 10))).toEqual(live);
      expect(await queueOf(db, 'ep-stale')).toMatchObject({
        queued: 0,
        in_flight: 0,
        next_due_at: null,
        ready_at: null,
      });
    });
  });

  describe('complete and fail', () => {
    it('complete writes only the attempt that holds the lease', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      const [d0, d1, d2, d3] = await addDeliveries(db, 'ep-a', [T0 - 40, T0 - 30, T0 - 20, T0 + 1000]);
      expect(idsOf(await claimAt(db, T0))).toEqual([d0, d1, d2]);
      // d1 goes back and is claimed again: its first attempt's worker is now stale.
      await db.transaction((tx) =>
        releaseDeliveries(tx, [{ id: d1!, attempt: 1, endpoint_id: 'ep-a' }], T0 + 10, CEILING),
      );
      const [again] = await claimAt(db, T0 + 10);
      expect(again).toMatchObject({ id: d1, attempts: 2 });
      const before = await deliveriesOf(db, [d1!, d3!]);

      const written = await completeDeliveries(
        db,
        [
          { id: d0!, attempt: 1, status: 200 },
          { id: d1!, attempt: 1, status: 200 }, // stale attempt
          { id: d2!, attempt: 1, status: 204 },
          { id: d3!, attempt: 0, status: 200 }, // pending, never claimed
        ],
        T0 + 20,
      );
      expect(
        written.map((r) => ({ id: r.id, endpoint_id: r.endpoint_id })).sort((x, y) => (x.id < y.id ? -1 : 1)),
      ).toEqual([
        { id: d0, endpoint_id: 'ep-a' },
        { id: d2, endpoint_id: 'ep-a' },
      ]);
      expect(await deliveriesOf(db, [d1!, d3!])).toEqual(before);
      const [r0, r2] = await deliveriesOf(db, [d0!, d2!]);
      expect(r0).toMatchObject({
        status: 'succeeded',
        last_status: 200,
        completed_at: T0 + 20,
        lease_expires_at: null,
      });
      expect(r2).toMatchObject({ status: 'succeeded', last_status: 204, completed_at: T0 + 20 });
      // A second write of the same outcome finds the row no longer delivering.
      expect(await completeDeliveries(db, [{ id: d0!, attempt: 1, status: 500 }], T0 + 30)).toEqual([]);
      expect((await deliveriesOf(db, [d0!]))[0]).toMatchObject({ last_status: 200, completed_at: T0 + 20 });
      expect(await completeDeliveries(db, [{ id: d1!, attempt: 2, status: 200 }], T0 + 30)).toHaveLength(1);
    });

    it('records a flush of successes with its statistics and queue settlement, fenced', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      const [d0, d1, d2] = await addDeliveries(db, 'ep-a', [T0 - 30, T0 - 20, T0 - 10]);
      expect(idsOf(await claimAt(db, T0))).toEqual([d0, d1, d2]);
      // Unkeyed: on PostgreSQL this is the one-statement flush (store/postgres/record-successes.ts).
      const item = (id: string, attempt: number, fast: boolean) => ({
        id,
        attempt,
        status: 204,
        endpoint_id: 'ep-a',
        tenant_id: 'acme',
        fast,
        ordering_key: null,
      });
      const written = await recordSuccesses(
        db,
        [item(d0!, 1, true), item(d1!, 0, true), item(d2!, 1, false)], // d1: a stale attempt number
        T0 + 20,
        CEILING,
      );
      expect(idsOf(written).sort()).toEqual([d0, d2].sort());
      expect((await deliveriesOf(db, [d0!, d1!, d2!])).map((d) => d.status)).toEqual([
        'succeeded',
        'delivering',
        'succeeded',
      ]);
      // In flight down by the two recorded; one fast success: slow start adds one to the limit.
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 1, queued: 0, concurrency_limit: 9 });
      const stats = await db.all<{ succeeded: number; failed: number }>(
        "SELECT succeeded, failed FROM delivery_stats WHERE endpoint_id = 'ep-a'",
      );
      expect(stats.map((r) => [Number(r.succeeded), Number(r.failed)])).toEqual([[2, 0]]);
      // The same flush again changes nothing: the fence lets no row through twice.
      expect(await recordSuccesses(db, [item(d0!, 1, true)], T0 + 30, CEILING)).toEqual([]);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 1, concurrency_limit: 9 });
    });

    it('a flush of unkeyed successes claims the room it frees in its own transaction (SQLite), or leaves it to the caller', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      // Twelve due: the first claim takes the starting limit of 8, four wait.
      const ids = await addDeliveries(db, 'ep-a', dueTimes(12));
      const first = await claimAt(db, T0, 100);
      expect(idsOf(first)).toEqual(ids.slice(0, 8));
      const item = (id: string, attempt: number) => ({
        id,
        attempt,
        status: 204,
        endpoint_id: 'ep-a',
        tenant_id: 'acme',
        fast: false,
        answerMs: null,
        ordering_key: null,
      });
      const next = { now: T0 + 20, leaseUntil: T0 + 20 + LEASE_MS, limit: 100, ceiling: CEILING };
      // Three recorded, one of them stale and fenced out: two slots are free for the claim.
      const written = await recordSuccessesThenClaim(
        db,
        [item(ids[0]!, 1), item(ids[1]!, 1), item(ids[2]!, 0)],
        T0 + 20,
        CEILING,
        next,
      );
      expect(idsOf(written.rows).sort()).toEqual([ids[0], ids[1]].sort());
      if (kind === 'sqlite') {
        // The oldest two of those waiting, with what their attempts need.
        expect(idsOf(written.claimed!)).toEqual(ids.slice(8, 10));
        expect(written.claimed!.map((a) => [a.attempts, a.url])).toEqual([
          [1, 'http://127.0.0.1:9/ep-a'],
          [1, 'http://127.0.0.1:9/ep-a'],
        ]);
      } else {
        // PostgreSQL records unkeyed successes in one statement, and the caller claims with its own.
        expect(written.claimed).toBeNull();
        expect(idsOf(await claimAt(db, T0 + 20, 100))).toEqual(ids.slice(8, 10));
      }
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 8, queued: 2 });
      expect(await statusCounts(db, 'ep-a')).toMatchObject({ succeeded: 2, delivering: 8, pending: 2 });
      // With no room asked for, nothing is claimed on either store.
      const none = await recordSuccessesThenClaim(db, [item(ids[3]!, 1)], T0 + 30, CEILING, {
        ...next,
        limit: 0,
      });
      expect(none.claimed).toBeNull();
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 7, queued: 2 });
    });

    it('fail schedules a retry or kills the delivery, fenced, keeping the first headers', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      const [d0, d1, d2] = await addDeliveries(db, 'ep-a', [T0 - 30, T0 - 20, T0 + 100_000]);
      expect(idsOf(await claimAt(db, T0))).toEqual([d0, d1]);
      const before = await deliveriesOf(db, [d1!, d2!]);

      const retried = await failDeliveries(
        db,
        [
          {
            id: d0!,
            attempt: 1,
            status: 500,
            error: 'HTTP 500',
            retryAt: T0 + 60_000,
            firstHeaders: '{"n":1}',
          },
          { id: d1!, attempt: 0, status: 500, error: 'stale', retryAt: T0 + 1, firstHeaders: null },
          { id: d2!, attempt: 0, status: 500, error: 'not claimed', retryAt: null, firstHeaders: null },
        ],
        T0 + 10,
      );
      expect(retried).toEqual([
        { id: d0, endpoint_id: 'ep-a', ordering_key: null, status: 'pending', next_attempt_at: T0 + 60_000 },
      ]);
      expect(await deliveriesOf(db, [d1!, d2!])).toEqual(before);
      expect((await deliveriesOf(db, [d0!]))[0]).toMatchObject({
        status: 'pending',
        attempts: 1,
        next_attempt_at: T0 + 60_000,
        lease_expires_at: null,
        last_status: 500,
        last_error: 'HTTP 500',
        first_headers: '{"n":1}',
        completed_at: null,
      });

      // The caller settles the queue; the retry is then claimed as attempt 2 and dies.
      await settleQueues(
        db,
        [settlement('ep-a', { finished: 1, requeued: 1, requeuedDue: T0 + 60_000 })],
        CEILING,
        T0 + 10,
      );
      const [second] = await claimAt(db, T0 + 60_000, 1);
      expect(second).toMatchObject({ id: d0, attempts: 2, first_headers: '{"n":1}' });
      const died = await failDeliveries(
        db,
        [{ id: d0!, attempt: 2, status: null, error: 'timed out', retryAt: null, firstHeaders: '{"n":2}' }],
        T0 + 60_100,
      );
      expect(died).toEqual([
        { id: d0, endpoint_id: 'ep-a', ordering_key: null, status: 'dead', next_attempt_at: T0 + 60_000 },
      ]);
      expect((await deliveriesOf(db, [d0!]))[0]).toMatchObject({
        status: 'dead',
        attempts: 2,
        last_status: null,
        last_error: 'timed out',
        first_headers: '{"n":1}',
        completed_at: T0 + 60_100,
        lease_expires_at: null,
      });
      // A late duplicate of the dead attempt's outcome is fenced off too.
      expect(
        await failDeliveries(
          db,
          [{ id: d0!, attempt: 2, status: 500, error: 'late', retryAt: T0 + 1, firstHeaders: null }],
          T0 + 60_200,
        ),
      ).toEqual([]);
    });
  });

  it('release puts unfinished claims back due now, fenced, the attempt number kept', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    const [d0, d1, d2, d3] = await addDeliveries(db, 'ep-a', dueTimes(4));
    expect(await claimAt(db, T0)).toHaveLength(4);
    expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 4, queued: 0, next_due_at: null });
    const released = await db.transaction((tx) =>
      releaseDeliveries(
        tx,
        [
          { id: d0!, attempt: 1, endpoint_id: 'ep-a' },
          { id: d1!, attempt: 1, endpoint_id: 'ep-a' },
          { id: d2!, attempt: 0, endpoint_id: 'ep-a' }, // stale
        ],
        T0 + 50,
        CEILING,
      ),
    );
    expect(released).toBe(2);
    const rows = await deliveriesOf(db, [d0!, d1!, d2!, d3!]);
    expect(rows.map((r) => [r.status, r.attempts, r.next_attempt_at, r.lease_expires_at])).toEqual([
      ['pending', 1, T0 + 50, null],
      ['pending', 1, T0 + 50, null],
      ['delivering', 1, T0 - 1000, T0 + LEASE_MS],
      ['delivering', 1, T0 - 1000, T0 + LEASE_MS],
    ]);
    expect(await queueOf(db, 'ep-a')).toMatchObject({
      in_flight: 2,
      queued: 2,
      next_due_at: T0 + 50,
      ready_at: T0 + 50,
    });
    const again = await claimAt(db, T0 + 50);
    expect(idsOf(again)).toEqual([d0, d1]);
    expect(again.map((c) => c.attempts)).toEqual([2, 2]);
  });

  describe('reap', () => {
    it('returns only expired leases to the queue, due now, keeping an earlier error', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      const [d0, d1, d2, d3] = await addDeliveries(db, 'ep-a', [T0 - 200, T0 - 100, T0 - 90, T0 - 80]);
      // d0 fails once (last_error set) and is retried before the others.
      expect(idsOf(await claimAt(db, T0, 1))).toEqual([d0]);
      await failDeliveries(
        db,
        [{ id: d0!, attempt: 1, status: 503, error: 'HTTP 503', retryAt: T0 - 150, firstHeaders: null }],
        T0,
      );
      await settleQueues(
        db,
        [settlement('ep-a', { finished: 1, requeued: 1, requeuedDue: T0 - 150 })],
        CEILING,
        T0,
      );
      expect(idsOf(await claimAt(db, T0, 2, { leaseUntil: T0 + 100 }))).toEqual([d0, d1]);
      expect(idsOf(await claimAt(db, T0, 1, { leaseUntil: T0 + 10_000 }))).toEqual([d2]);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 3, queued: 1, next_due_at: T0 - 80 });

      // A lease expiring at T0+100 is still held at T0+100.
      expect(await db.transaction((tx) => reapExpiredLeases(tx, T0 + 100, CEILING))).toBe(0);
      expect(await db.transaction((tx) => reapExpiredLeases(tx, T0 + 101, CEILING))).toBe(2);
      const rows = await deliveriesOf(db, [d0!, d1!, d2!, d3!]);
      expect(rows.map((r) => [r.status, r.attempts, r.next_attempt_at, r.lease_expires_at])).toEqual([
        ['pending', 2, T0 + 101, null],
        ['pending', 1, T0 + 101, null],
        ['delivering', 1, T0 - 90, T0 + 10_000],
        ['pending', 0, T0 - 80, null],
      ]);
      expect(rows.map((r) => r.last_error)).toEqual([
        'HTTP 503',
        'worker lease expired during the attempt',
        null,
        null,
      ]);
      expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 1, queued: 3, next_due_at: T0 - 80 });
      // The reaped attempts are claimed again with the next attempt numbers.
      const again = await claimAt(db, T0 + 101);
      expect(again.map((c) => [c.id, c.attempts]).sort()).toEqual([
        [d0, 3],
        [d1, 2],
        [d3, 1],
      ]);
    });

    it.runIf(kind === 'postgres')(
      'skips a delivery another transaction holds, without waiting, and reaps it once released',
      async () => {
        const { db, database } = store;
        await addEndpoint(db, 'ep-a');
        const [d0, d1] = await addDeliveries(db, 'ep-a', dueTimes(2));
        expect(await claimAt(db, T0, 10, { leaseUntil: T0 + 100 })).toHaveLength(2);

        const holder = new pg.Client({
          connectionString: PG_URL,
          options: `-c search_path=${database.schema}`,
        });
        await holder.connect();
        try {
          await holder.query('BEGIN');
          await holder.query('SELECT id FROM deliveries WHERE id = $1 FOR UPDATE', [d0]);
          const reap = db.transaction((tx) => reapExpiredLeases(tx, T0 + 200, CEILING));
          let timer: ReturnType<typeof setTimeout> | undefined;
          const outcome = await Promise.race([
            reap,
            new Promise<'blocked'>((r) => (timer = setTimeout(() => r('blocked'), 1000))),
          ]);
          clearTimeout(timer);
          if (outcome === 'blocked') {
            await holder.query('COMMIT'); // let the waiting reap finish before failing
            await reap;
          }
          expect(outcome).toBe(1);
          expect((await deliveriesOf(db, [d0!, d1!])).map((r) => r.status)).toEqual([
            'delivering',
            'pending',
          ]);
          expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 1, queued: 1 });
          await holder.query('COMMIT');
        } finally {
          await holder.end();
        }
        expect(await db.transaction((tx) => reapExpiredLeases(tx, T0 + 300, CEILING))).toBe(1);
        expect((await deliveriesOf(db, [d0!]))[0]).toMatchObject({
          status: 'pending',
          next_attempt_at: T0 + 300,
        });
        expect(await queueOf(db, 'ep-a')).toMatchObject({ in_flight: 0, queued: 2, next_due_at: T0 + 200 });
      },
    );
  });

  describe('cancel', () => {
    it('cancelForEndpoint cancels pending and delivering rows and empties the queue', async () => {
      const { db } = store;
      await addEndpoint(db, 'ep-a');
      await addEndpoint(db, 'ep-b');
      const [a0, a1, a2, a3, a4, a5] = await addDeliveries(db, 'ep-a', [
        T0 - 60,
        T0 - 50,
        T0 - 40,
        T0 - 30,
        T0 - 20,
        T0 + 1000,
      ]);
      expect(idsOf(await claimAt(db, T0, 3))).toEqual([a0, a1, a2]);
      const others = await addDeliveries(db, 'ep-b', dueTimes(2));
      await completeDeliveries(db, [{ id: a0!, attempt: 1, status: 200 }], T0);
      await failDeliveries(
        db,
        [{ id: a1!, attempt: 1, status: 410, error: 'gone', retryAt: null, firstHeaders: null }],
        T0,
      );
      await settleQueues(db, [settlement('ep-a', { finished: 2 })], CEILING, T0);

      expect(await db.transaction((tx) => cancelForEndpoint(tx, 'ep-a', T0 + 10))).toBe(4);
      const rows = await deliveriesOf(db, [a0!, a1!, a2!, a3!, a4!, a5!]);
      expect(rows.map((r) => r.status)).toEqual([
        'succeeded',
        'dead',
        'cancelled',
        'cancelled',
        'cancelled',
        'cancelled',
      ]);
      for (const r of rows.slice(2))
        expect(r).toMatchObject({ completed_at: T0 + 10, lease_expires_at: null });
      expect(await queueOf(db, 'ep-a')).toMatchObject({
        active: 0,
        queued: 0,
        in_flight: 0,
        next_due_at: null,
        ready_at: null,
      });
      // The attempt that was in flight when the endpoint went cannot write over the cancellation.
      expect(await completeDeliveries(db, [{ id: a2!, attempt: 1, status: 200 }], T0 + 20)).toEqual([]);
      expect(idsOf(await claimAt(db, T0 + 2000))).toEqual(others);
    });

    it('sweepDeletedEndpoints cancels what a late fan-out left for a deleted endpoint only', async () => {
      const { db } = store;
      for (const id of ['ep-deleted', 'ep-disabled']) {
        await addEndpoint(db, id);
        await setQueueActive(db, id, false, T0);
      }
      await db.run(`UPDATE endpoints SET status = 'deleted', deleted_at = $1 WHERE id = 'ep-deleted'`, [T0]);
      await db.run(`UPDATE endpoints SET status = 'disabled' WHERE id = 'ep-disabled'`);
      // A fan-out that read both endpoints as active before they changed.
      const strays = await addDeliveries(db, 'ep-deleted', dueTimes(2));
      const waiting = await addDeliveries(db, 'ep-disabled', dueTimes(2));
      expect(await queueOf(db, 'ep-deleted')).toMatchObject({ active: 0, queued: 2 });

      expect(await db.transaction((tx) => sweepDeletedEndpoints(tx, T0 + 10))).toBe(2);
      expect((await deliveriesOf(db, strays)).map((r) => r.status)).toEqual(['cancelled', 'cancelled']);
      expect((await deliveriesOf(db, waiting)).map((r) => r.status)).toEqual(['pending', 'pending']);
      expect(await queueOf(db, 'ep-deleted')).toMatchObject({ queued: 0, next_due_at: null });
      expect(await queueOf(db, 'ep-disabled')).toMatchObject({ active: 0, queued: 2 });
      expect(await db.transaction((tx) => sweepDeletedEndpoints(tx, T0 + 20))).toBe(0);
    });
  });
});
