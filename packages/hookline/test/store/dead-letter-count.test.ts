// The dead-letter count, on both stores: kept by the flushes that write dead letters, read as one row
// by /metrics, the console and the queue sampler, and set right by the hourly retention job should
// rows be deleted by hand (store/dead-letters.ts, migration 8).
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  countDeadLetters,
  insertDeadLetters,
  recountDeadLetters,
  type DeadLetterRow,
} from '../../src/store/dead-letters.js';
import { statements as deadLetterCountMigration } from '../../src/store/migrations/008-dead-letter-count.js';
import { statements as awaitingMigration } from '../../src/store/migrations/009-dead-letters-awaiting.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { T0, addDeliveries, addEndpoint, openQueueStore, type QueueStore } from './queue-fixtures.js';

describe.each(STORE_KINDS)('dead-letter count on %s', (kind) => {
  let store: QueueStore;
  beforeEach(async () => {
    store = await openQueueStore(kind);
  });
  afterEach(async () => {
    await store.close();
  });

  let next = 0;
  const deadLetters = (n: number): DeadLetterRow[] =>
    Array.from({ length: n }, () => {
      const i = next++;
      return {
        id: `dl_${i}`,
        delivery_id: `dlv_${i}`,
        tenant_id: 'acme',
        endpoint_id: 'ep-a',
        message_id: `msg_${i}`,
        event_type: 'user.created',
        attempts: 3,
        last_error: 'HTTP 500',
        last_response: null,
        original: Buffer.from(`sealed ${i}`),
        died_at: T0,
        replayed_at: null,
        replay_delivery_id: null,
        ordering_key: null,
      };
    });
  const scanned = async () =>
    Number((await store.db.one<{ n: number }>('SELECT COUNT(*) AS n FROM dead_letters'))!.n);

  it('counts what the flushes write, in their transaction, without reading the dead letters', async () => {
    const { db } = store;
    expect((await countDeadLetters(db)).stored).toBe(0);
    await db.transaction((tx) => insertDeadLetters(tx, deadLetters(3)));
    // More than one multi-row insert's worth at once.
    await db.transaction((tx) => insertDeadLetters(tx, deadLetters(250)));
    await db.transaction((tx) => insertDeadLetters(tx, []));
    expect((await countDeadLetters(db)).stored).toBe(253);
    expect(await scanned()).toBe(253);
    // A flush that rolls back takes its count with it.
    await expect(
      db.transaction(async (tx) => {
        await insertDeadLetters(tx, deadLetters(5));
        throw new Error('the flush failed');
      }),
    ).rejects.toThrow('the flush failed');
    expect((await countDeadLetters(db)).stored).toBe(253);
  });

  it('the retention job sets the count right after dead letters were deleted by hand', async () => {
    const { db } = store;
    await db.transaction((tx) => insertDeadLetters(tx, deadLetters(20)));
    await db.run(`DELETE FROM dead_letters WHERE id IN (SELECT id FROM dead_letters ORDER BY id LIMIT 7)`);
    expect((await countDeadLetters(db)).stored).toBe(20);
    expect((await recountDeadLetters(db)).stored).toBe(13);
    expect((await countDeadLetters(db)).stored).toBe(13);
    await db.transaction((tx) => insertDeadLetters(tx, deadLetters(2)));
    expect((await countDeadLetters(db)).stored).toBe(15);
    // Even the counter's own row, deleted by hand, comes back.
    await db.run('DELETE FROM counters');
    expect((await countDeadLetters(db)).stored).toBe(0);
    expect((await recountDeadLetters(db)).stored).toBe(15);
    expect((await countDeadLetters(db)).stored).toBe(15);
  });

  it.runIf(kind === 'postgres')(
    'a recount waits for a flush writing dead letters, and counts them once it has committed',
    async () => {
      const { db } = store;
      const other = store.open();
      await db.transaction((tx) => insertDeadLetters(tx, deadLetters(2)));
      let commit!: () => void;
      const held = new Promise<void>((resolve) => (commit = resolve));
      let written!: () => void;
      const inserted = new Promise<void>((resolve) => (written = resolve));
      // A flush that has written three dead letters and counted them, not yet committed.
      const flush = db.transaction(async (tx) => {
        await insertDeadLetters(tx, deadLetters(3));
        written();
        await held;
      });
      await inserted;
      const recount = recountDeadLetters(other);
      // The recount is blocked on the counter's row while the flush holds it.
      const early = await Promise.race([recount.then(() => 'done'), sleep(300).then(() => 'waiting')]);
      expect(early).toBe('waiting');
      commit();
      await flush;
      // Counted after the flush committed: a count taken before its rows were visible would say 2.
      expect((await recount).stored).toBe(5);
      expect((await countDeadLetters(db)).stored).toBe(5);
      expect(await scanned()).toBe(5);
    },
  );

  it('migration 9 counts as awaiting those not replayed or whose replay died or was cancelled', async () => {
    const { db } = store;
    const rows = deadLetters(5);
    // 0: never replayed; 1: replay delivered; 2: replay died; 3: replay cancelled; 4: replay pruned
    // after it died (died_at moved past replayed_at).
    await addEndpoint(db, 'ep-a');
    const replays = await addDeliveries(db, 'ep-a', [T0, T0, T0], 'replay');
    for (const [i, status] of [
      [1, 'succeeded'],
      [2, 'dead'],
      [3, 'cancelled'],
    ] as const) {
      rows[i]!.replayed_at = T0 + 10;
      rows[i]!.replay_delivery_id = replays[i - 1]!;
      await db.run('UPDATE deliveries SET status = $2 WHERE id = $1', [replays[i - 1]!, status]);
    }
    rows[4]!.replayed_at = T0 + 10;
    rows[4]!.replay_delivery_id = 'dlv_pruned';
    rows[4]!.died_at = T0 + 20;
    await db.transaction((tx) => insertDeadLetters(tx, rows));
    await db.run('DROP INDEX IF EXISTS dead_letters_awaiting');
    await db.run('ALTER TABLE dead_letters DROP COLUMN awaiting');
    await db.run(`DELETE FROM counters WHERE name = 'dead_letters_awaiting'`);
    for (const sql of awaitingMigration(kind)) await db.run(sql);
    const awaiting = await db.all<{ id: string }>(
      'SELECT id FROM dead_letters WHERE awaiting = 1 ORDER BY id',
    );
    expect(awaiting.map((r) => r.id)).toEqual([rows[0]!.id, rows[2]!.id, rows[3]!.id, rows[4]!.id]);
    expect(await countDeadLetters(db)).toEqual({ stored: 5, awaiting: 4 });
  });

  it('migration 8 starts the count at the dead letters already there', async () => {
    const { db } = store;
    await db.transaction((tx) => insertDeadLetters(tx, deadLetters(4)));
    await db.run('DELETE FROM counters');
    const [, startCount] = deadLetterCountMigration(kind);
    await db.run(startCount!);
    expect((await countDeadLetters(db)).stored).toBe(4);
  });
});
