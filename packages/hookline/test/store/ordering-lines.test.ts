// Ordering keys in the store, on both stores (docs/architecture.md, "Ordering keys"): a keyed delivery
// joins its line at its endpoint, held while an earlier one is unfinished; the next goes when the head
// succeeds or dies, not when it is retried; other keys and unkeyed deliveries are not held up; fan-out
// takes a keyed message only after the earlier messages of its key.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  advanceLines,
  cancelForEndpoint,
  completeDeliveries,
  failDeliveries,
  recordSuccesses,
  recordSuccessesThenClaim,
} from '../../src/store/deliveries.js';
import { settleQueues } from '../../src/store/endpoint-queues.js';
import { claimForFanout } from '../../src/store/messages.js';
import { statements as lineIndexMigration } from '../../src/store/migrations/007-line-index-by-completion.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  CEILING,
  T0,
  addDeliveries,
  addEndpoint,
  claimAt,
  deliveriesOf,
  dueTimes,
  idsOf,
  openQueueStore,
  queueOf,
  settlement,
  successOf,
  type QueueStore,
} from './queue-fixtures.js';

describe.each(STORE_KINDS)('ordering lines on %s', (kind) => {
  let store: QueueStore;
  beforeEach(async () => {
    store = await openQueueStore(kind);
  });
  afterEach(async () => {
    await store.close();
  });

  /**
   * The deliveries' statuses; on the way, each must have a completion time exactly when it is finished:
   * that is how deliveries_open_by_line tells a line's unfinished rows (migration 007).
   */
  const statuses = async (ids: readonly string[]) => {
    const rows = await deliveriesOf(store.db, ids);
    for (const d of rows) {
      const unfinished = d.status === 'pending' || d.status === 'delivering' || d.status === 'held';
      expect(d.completed_at === null, `${d.id} is ${d.status}, completed_at ${d.completed_at}`).toBe(
        unfinished,
      );
    }
    return rows.map((d) => d.status);
  };

  /** Records successes the way the outcome writer does (SQLite: one transaction; PostgreSQL too when keyed). */
  const succeed = (
    claimed: { id: string; attempts: number; endpoint_id: string; ordering_key: string | null }[],
  ) => recordSuccesses(store.db, claimed.map(successOf), T0 + 10, CEILING);

  it('a keyed delivery is held behind an unfinished earlier one; the queue counts it but is not due for it', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    const ids = await addDeliveries(db, 'ep-a', dueTimes(4), 'd', ['k1', 'k1', 'k2', null]);
    expect(await statuses(ids)).toEqual(['pending', 'held', 'pending', 'pending']);
    expect(await queueOf(db, 'ep-a')).toMatchObject({ queued: 4 });
    // A later batch of the same line waits behind the first batch's head too.
    const later = await addDeliveries(db, 'ep-a', dueTimes(2), 'e', ['k1', 'k2'], 100);
    expect(await statuses(later)).toEqual(['held', 'held']);
    const claimed = await claimAt(db, T0, 100);
    expect(idsOf(claimed).sort()).toEqual([ids[0], ids[2], ids[3]].sort());
    expect(claimed.find((c) => c.id === ids[0])!.ordering_key).toBe('k1');
    // Nothing else is claimable until a head ends: the held ones are not in the due index.
    expect(await claimAt(db, T0 + 60_000, 100)).toEqual([]);
  });

  it('a flush that lets the next of a line go claims it in the same transaction', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    const ids = await addDeliveries(db, 'ep-a', dueTimes(3), 'd', ['k1', 'k1', 'k1']);
    const [head] = await claimAt(db, T0, 100);
    expect(head!.id).toBe(ids[0]);
    const now = T0 + 10;
    const written = await recordSuccessesThenClaim(
      db,
      [
        {
          id: head!.id,
          attempt: head!.attempts,
          status: 200,
          endpoint_id: 'ep-a',
          tenant_id: 'acme',
          fast: true,
          answerMs: null,
          ordering_key: 'k1',
        },
      ],
      now,
      CEILING,
      { now, leaseUntil: now + 30_000, limit: 100, ceiling: CEILING },
    );
    expect(idsOf(written.rows)).toEqual([ids[0]]);
    // Promoted by the flush, due at its time, and taken by its claim: the line moves one delivery a
    // transaction. The third stays held behind it.
    expect(idsOf(written.claimed!)).toEqual([ids[1]]);
    expect(await statuses(ids)).toEqual(['succeeded', 'delivering', 'held']);
  });

  it('a success lets the next of its line go, in line order; lines do not wait for each other', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    const ids = await addDeliveries(db, 'ep-a', dueTimes(6), 'd', ['k1', 'k2', 'k1', 'k2', 'k1', null]);
    const first = await claimAt(db, T0, 100);
    expect(idsOf(first).sort()).toEqual([ids[0], ids[1], ids[5]].sort());
    // Only k1's head succeeds: k1's next goes, k2 stays as it was.
    await succeed(first.filter((c) => c.id === ids[0]));
    expect(await statuses(ids)).toEqual(['succeeded', 'delivering', 'pending', 'held', 'held', 'delivering']);
    // Due when it was fanned out, not when it was let go: the queue's next due time follows it.
    expect(await queueOf(db, 'ep-a')).toMatchObject({ queued: 3, next_due_at: T0 - 1000 });
    const second = await claimAt(db, T0 + 10, 100);
    expect(idsOf(second)).toEqual([ids[2]]);
    await succeed(second);
    expect(await statuses([ids[4]!])).toEqual(['pending']);
  });

  it('the next of a line, let go, is claimed before the unkeyed work that arrived after it', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    // A line of three, fanned out first; then a backlog of newer unkeyed deliveries.
    const line = await addDeliveries(db, 'ep-a', dueTimes(3, T0 - 1000), 'k', ['k', 'k', 'k']);
    const unkeyed = await addDeliveries(db, 'ep-a', dueTimes(20, T0 - 500), 'u');
    // One attempt at a time: the claim takes the oldest due delivery, the line's head.
    const [head] = await claimAt(db, T0, 1);
    expect(head!.id).toBe(line[0]);
    await succeed([head!]);
    // Let go at T0 + 10, the next of the line keeps its own due time (T0 - 1000), older than every
    // unkeyed one: the next claim of one takes it, not the backlog.
    expect((await deliveriesOf(db, [line[1]!]))[0]).toMatchObject({
      status: 'pending',
      next_attempt_at: T0 - 1000,
    });
    expect(await queueOf(db, 'ep-a')).toMatchObject({ next_due_at: T0 - 1000 });
    const [next] = await claimAt(db, T0 + 10, 1);
    expect(next!.id).toBe(line[1]);
    // A death lets the third go the same way.
    await db.transaction(async (tx) => {
      const rows = await failDeliveries(
        tx,
        [
          {
            id: next!.id,
            attempt: next!.attempts,
            status: 500,
            error: 'HTTP 500',
            retryAt: null,
            firstHeaders: null,
          },
        ],
        T0 + 20,
      );
      await advanceLines(tx, rows, T0 + 20);
    });
    const [third] = await claimAt(db, T0 + 20, 1);
    expect(third!.id).toBe(line[2]);
    expect(await statuses(unkeyed)).toEqual(unkeyed.map(() => 'pending'));
  });

  it('a retry keeps its place at the head; a death ends it and the next goes', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    const ids = await addDeliveries(db, 'ep-a', dueTimes(3), 'd', ['k', 'k', 'k']);
    const [head] = await claimAt(db, T0, 100);
    const retried = await db.transaction(async (tx) => {
      const rows = await failDeliveries(
        tx,
        [
          {
            id: head!.id,
            attempt: 1,
            status: 500,
            error: 'HTTP 500',
            retryAt: T0 + 1000,
            firstHeaders: null,
          },
        ],
        T0 + 5,
      );
      await advanceLines(
        tx,
        rows.filter((r) => r.status === 'dead'),
        T0 + 5,
      );
      await settleQueues(
        tx,
        [settlement('ep-a', { finished: 1, requeued: 1, requeuedDue: T0 + 1000 })],
        CEILING,
        T0 + 5,
      );
      return rows;
    });
    expect(retried).toHaveLength(1);
    expect(await statuses(ids)).toEqual(['pending', 'held', 'held']);
    // Due again only at its retry time, and still the only claimable one.
    expect(await claimAt(db, T0 + 999, 100)).toEqual([]);
    const [again] = await claimAt(db, T0 + 1000, 100);
    expect(again!.id).toBe(ids[0]);
    const died = await db.transaction(async (tx) => {
      const rows = await failDeliveries(
        tx,
        [{ id: again!.id, attempt: 2, status: 500, error: 'HTTP 500', retryAt: null, firstHeaders: null }],
        T0 + 1005,
      );
      await advanceLines(
        tx,
        rows.filter((r) => r.status === 'dead'),
        T0 + 1005,
      );
      return rows;
    });
    expect(died).toHaveLength(1);
    expect(await statuses(ids)).toEqual(['dead', 'pending', 'held']);
    expect(idsOf(await claimAt(db, T0 + 1005, 100))).toEqual([ids[1]]);
  });

  it('a stale outcome (fenced out) does not advance the line', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    const ids = await addDeliveries(db, 'ep-a', dueTimes(2), 'd', ['k', 'k']);
    await claimAt(db, T0, 100);
    const rows = await db.transaction(async (tx) => {
      const done = await completeDeliveries(tx, [{ id: ids[0]!, attempt: 7, status: 200 }], T0 + 5);
      await advanceLines(tx, done, T0 + 5);
      return done;
    });
    expect(rows).toEqual([]);
    expect(await statuses(ids)).toEqual(['delivering', 'held']);
  });

  it('deleting the endpoint cancels held deliveries with the rest', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    const ids = await addDeliveries(db, 'ep-a', dueTimes(3), 'd', ['k', 'k', null]);
    await db.transaction((tx) => cancelForEndpoint(tx, 'ep-a', T0));
    expect(await statuses(ids)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(await queueOf(db, 'ep-a')).toMatchObject({ queued: 0, in_flight: 0 });
  });

  it('migration 007 gives a finished delivery without a completion time one, so it leaves its line', async () => {
    const { db } = store;
    await addEndpoint(db, 'ep-a');
    const ids = await addDeliveries(db, 'ep-a', dueTimes(2), 'd', ['k', 'k']);
    // As a row finished by an earlier version might be: dead, but without completed_at.
    await db.run(
      `UPDATE deliveries SET status = 'dead', completed_at = NULL, updated_at = $2 WHERE id = $1`,
      [ids[0], T0 + 7],
    );
    const [fixUp] = lineIndexMigration(kind);
    await db.run(fixUp!);
    expect((await deliveriesOf(db, [ids[0]!]))[0]).toMatchObject({ status: 'dead', completed_at: T0 + 7 });
    // The line's head is now the held one, and a success elsewhere in the line lets it go.
    await db.transaction((tx) => advanceLines(tx, [{ endpoint_id: 'ep-a', ordering_key: 'k' }], T0 + 8));
    expect(await statuses(ids)).toEqual(['dead', 'pending']);
  });

  it('fan-out takes a keyed message only after the earlier messages of its key, taking them in if it can', async () => {
    const { db } = store;
    // m2 was written with an earlier clock reading than m1 but after it in emit order (two API
    // processes whose clocks disagree): a batch ordered by time reads m2 before m1.
    await db.run(
      `INSERT INTO fanout_queue (message_id, tenant_id, event_type, created_at, ordering_key, ordering_seq)
       VALUES ('m1', 'acme', 'user.updated', ${T0}, 'k', 1), ('m2', 'acme', 'user.updated', ${T0 - 5}, 'k', 2),
         ('m3', 'acme', 'user.updated', ${T0 - 10}, 'other', 3), ('m4', 'acme', 'user.updated', ${T0 - 8}, NULL, NULL)`,
    );
    const batch = async (limit: number) =>
      (await db.transaction((tx) => claimForFanout(tx, limit))).map((m) => m.id);
    // A batch that reads m2 takes m1, the earlier message of its key, in with it, first: m2 never
    // waits on a message no worker is fanning out.
    expect(await batch(3)).toEqual(['m1', 'm3', 'm4', 'm2']);
    // Fanned out: off the queue.
    await db.run(`DELETE FROM fanout_queue WHERE message_id IN ('m3', 'm4')`);
    expect(await batch(1)).toEqual(['m1', 'm2']);
    await db.run(`DELETE FROM fanout_queue WHERE message_id = 'm1'`);
    expect(await batch(1)).toEqual(['m2']);
  });

  it.runIf(kind === 'postgres')(
    'fan-out leaves a keyed message while another worker is fanning out an earlier one of its key',
    async () => {
      const { db } = store;
      await db.run(
        `INSERT INTO fanout_queue (message_id, tenant_id, event_type, created_at, ordering_key, ordering_seq)
         VALUES ('m1', 'acme', 'user.updated', ${T0}, 'k', 1), ('m2', 'acme', 'user.updated', ${T0 + 5}, 'k', 2),
           ('m3', 'acme', 'user.updated', ${T0 + 10}, NULL, NULL)`,
      );
      const other = store.open();
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const lockedNow = new Promise<void>((r) => (locked = r));
      // Another worker's fan-out holds m1 until released.
      const otherWorker = other.transaction(async (tx) => {
        expect((await claimForFanout(tx, 1)).map((m) => m.id)).toEqual(['m1']);
        locked();
        await held;
      });
      await lockedNow;
      expect((await db.transaction((tx) => claimForFanout(tx, 10))).map((m) => m.id)).toEqual(['m3']);
      release();
      await otherWorker;
    },
  );
});
