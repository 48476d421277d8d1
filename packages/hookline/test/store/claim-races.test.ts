// A claim racing the success that lets the next delivery of a line go, on PostgreSQL
// (docs/architecture.md, "Claiming" and "Ordering keys"). The claim reads deliveries in its
// statement's snapshot and the queue row at its latest version, once locked. A success committed
// between the two makes the next of the line pending while leaving the queue's `queued` and
// `next_due_at` as they were (another delivery was due already). A claim that told a changed row by
// those two columns took the deliveries it saw, found none left, and cleared `next_due_at`: the
// promoted delivery stayed pending and unclaimed until something else touched its endpoint's queue
// (8 to 36 of 300 races here; an ordering test once stalled on it in CI).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recordSuccesses } from '../../src/store/deliveries.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  CEILING,
  T0,
  addDeliveries,
  addEndpoint,
  claimAt,
  deliveriesOf,
  openQueueStore,
  successOf,
  type QueueStore,
} from './queue-fixtures.js';

const RACES = 300;
/** Ready queues that sort before the raced one: the claim locks them first, which widens the window. */
const FILLERS = 100;

describe.runIf(STORE_KINDS.includes('postgres'))('a claim racing a line advance on postgres', () => {
  let store: QueueStore;
  beforeEach(async () => {
    store = await openQueueStore('postgres');
  });
  afterEach(async () => {
    await store.close();
  });

  it('never leaves the promoted delivery pending where no claim will find it', async () => {
    const { db } = store;
    const claimer = store.open();
    for (let f = 0; f < FILLERS; f++) await addEndpoint(db, `filler-${String(f).padStart(3, '0')}`);
    let claimedAfterCommit = 0;
    const stranded: string[] = [];
    for (let i = 0; i < RACES; i++) {
      const endpoint = `ep-${String(i).padStart(4, '0')}`;
      await addEndpoint(db, endpoint);
      // The head of k1 and an unkeyed delivery due; the second of k1 held behind its head.
      const [head, next] = await addDeliveries(db, endpoint, [T0 - 1000, T0 - 1000, T0 - 1000], 'd', [
        'k1',
        'k1',
        null,
      ]);
      const [claimedHead] = await claimAt(db, T0, 1);
      expect(claimedHead!.id).toBe(head);
      await db.run("UPDATE endpoint_queues SET next_due_at = $1 WHERE endpoint_id LIKE 'filler-%'", [
        T0 - 5000,
      ]);
      // The success first, the claim after a random 0-5 ms: its snapshot and its lock fall on either
      // side of the success's commit in some of the races.
      const [, claimed] = await Promise.all([
        recordSuccesses(db, [successOf(claimedHead!)], T0 + 10, CEILING),
        new Promise((r) => setTimeout(r, Math.random() * 5)).then(() =>
          claimAt(claimer, T0 + 20, FILLERS + 5),
        ),
      ]);
      if (claimed.some((c) => c.id === next)) {
        claimedAfterCommit++;
        continue;
      }
      const [state] = await deliveriesOf(db, [next!]);
      expect(state!.status).toBe('pending');
      if (!(await claimAt(db, T0 + 30, 1000)).some((c) => c.id === next)) stranded.push(next!);
    }
    expect(stranded).toEqual([]);
    // Both orders happened: the claim came after the commit in some races and before it in others.
    expect(claimedAfterCommit).toBeGreaterThan(0);
    expect(claimedAfterCommit).toBeLessThan(RACES);
  }, 120_000);
});
