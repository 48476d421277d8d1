// A line's head ending while the next of its key is fanned out, on PostgreSQL (docs/architecture.md,
// "Ordering keys"). Both transitions lock the endpoint's queue row, and each reads the line in a
// statement that starts once it holds that lock: a statement whose snapshot was taken while it waited
// would not see what the other committed, and the next delivery would stay held behind a head that has
// ended (fan-out), or not be let go (the success). Each case holds one side open, makes the other wait
// for it, then commits.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { advanceLines, completeDeliveries, recordSuccesses } from '../../src/store/deliveries.js';
import { lockQueues } from '../../src/store/endpoint-queues.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  CEILING,
  T0,
  addDeliveries,
  addDeliveriesWithin,
  addEndpoint,
  claimAt,
  deliveriesOf,
  openQueueStore,
  successOf,
  type QueueStore,
} from './queue-fixtures.js';

describe.runIf(STORE_KINDS.includes('postgres'))(
  'a line head ending while its next is fanned out, on postgres',
  () => {
    let store: QueueStore;
    beforeEach(async () => {
      store = await openQueueStore('postgres');
    });
    afterEach(async () => {
      await store.close();
    });

    /** The head of line k1 at endpoint `ep`, claimed. */
    async function claimedHead(db: Db) {
      await addEndpoint(db, 'ep');
      const [head] = await addDeliveries(db, 'ep', [T0 - 1000], 'head', ['k1']);
      const [claimed] = await claimAt(db, T0, 10);
      expect(claimed!.id).toBe(head);
      return claimed!;
    }

    /**
     * Runs `holder` in a transaction on another connection and keeps it open until `waiter` (started once
     * the holder has written) waits for one of its row locks; then commits it and answers the waiter's
     * result.
     */
    async function whileHeld<T>(holder: (tx: Db) => Promise<unknown>, waiter: () => Promise<T>): Promise<T> {
      const other = store.open();
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let xid!: string;
      let written!: () => void;
      const wrote = new Promise<void>((r) => (written = r));
      const holding = other.transaction(async (tx) => {
        await holder(tx as Db);
        const row = await tx.one<{ xid: string }>(
          'SELECT (pg_current_xact_id()::text::bigint % 4294967296)::text AS xid',
        );
        xid = row!.xid;
        written();
        await released;
      });
      await wrote;
      const waiting = waiter();
      // Waiting for the holder's transaction: a lock on its id that is not granted.
      for (let i = 0; ; i++) {
        const row = await store.db.one<{ n: string | number }>(
          `SELECT COUNT(*) AS n FROM pg_locks WHERE locktype = 'transactionid' AND transactionid::text = $1
           AND NOT granted`,
          [xid],
        );
        if (Number(row!.n) > 0) break;
        if (i > 2000) throw new Error('the waiter never waited for the holder');
        await new Promise((r) => setTimeout(r, 5));
      }
      release();
      await holding;
      return waiting;
    }

    it('fan-out waiting for a success sees the head ended: the next is pending, not held', async () => {
      const { db } = store;
      const head = await claimedHead(db);
      const [next] = await whileHeld(
        async (tx) => {
          // The success, as a flush writes it: queue row locked, head ended, its line advanced (empty).
          await lockQueues(tx, ['ep']);
          const rows = await completeDeliveries(
            tx,
            [{ id: head.id, attempt: head.attempts, status: 200 }],
            T0 + 10,
          );
          expect(rows).toHaveLength(1);
          await advanceLines(tx, rows, T0 + 10);
        },
        () => addDeliveries(db, 'ep', [T0 + 20], 'next', ['k1'], 2),
      );
      const [state] = await deliveriesOf(db, [next!]);
      expect(state!.status).toBe('pending');
      expect((await claimAt(db, T0 + 30, 10)).map((c) => c.id)).toEqual([next]);
    });

    it('a success waiting for a fan-out lets go the next it added: pending, not held', async () => {
      const { db } = store;
      const head = await claimedHead(db);
      let next = '';
      await whileHeld(
        async (tx) => {
          [next] = await addDeliveriesWithin(tx, 'ep', [T0 + 20], 'next', ['k1'], 2);
        },
        () => recordSuccesses(db, [successOf(head)], T0 + 10, CEILING),
      );
      const [state] = await deliveriesOf(db, [next]);
      expect(state!.status).toBe('pending');
      expect((await claimAt(db, T0 + 30, 10)).map((c) => c.id)).toEqual([next]);
    });
  },
);
