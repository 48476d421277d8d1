// The batched outcome writer: fenced writes, stats, and a close() that does not return while a
// write is still under way (the caller closes the database right after).
import { afterEach, describe, expect, it } from 'vitest';
import type { Context } from '../../src/context.js';
import { fanOutBatch } from '../../src/engine/fanout.js';
import { OutcomeWriter } from '../../src/delivery/outcome-writer.js';
import { claimsWithWrite, writeOutcomes, type Outcome } from '../../src/engine/outcomes.js';
import type { Db } from '../../src/store/db.js';
import type { ClaimedAttempt } from '../../src/store/attempts.js';
import { claimDeliveries, getDelivery } from '../../src/store/deliveries.js';
import { eventually } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, emit, sleep } from './support.js';

/** The service's database with every transaction held back for `delayMs` before it starts. */
function slowTransactions(db: Db, delayMs: number): Db {
  return {
    dialect: db.dialect,
    capabilities: db.capabilities,
    all: (sql, params) => db.all(sql, params),
    one: (sql, params) => db.one(sql, params),
    run: (sql, params) => db.run(sql, params),
    transaction: async (fn) => {
      await sleep(delayMs);
      return db.transaction(fn);
    },
    ping: () => db.ping(),
    notifications: db.notifications,
    close: () => db.close(),
    startMaintenance: () => null,
    threadShare: () => null,
    threadExited: () => {},
  };
}

describe.each(STORE_KINDS)('OutcomeWriter on %s', (kind) => {
  let t: TestService | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  /** A service without a worker, and `count` deliveries claimed by hand (status delivering, attempt 1). */
  async function claimed(count: number): Promise<ClaimedAttempt[]> {
    t = await startTestService(kind);
    await createEndpoint(t, { url: 'http://127.0.0.1:9/unused', events: ['*'] });
    for (let i = 0; i < count; i++) await emit(t, 'user.updated', { i });
    await fanOutBatch(t.service.ctx);
    const now = Date.now();
    const rows = await claimDeliveries(t.service.ctx.db, {
      now,
      leaseUntil: now + 60_000,
      limit: count,
      ceiling: count,
    });
    expect(rows).toHaveLength(count);
    return rows;
  }

  it('writes success and retry outcomes, fenced by the attempt number', async () => {
    const [a, b, c] = await claimed(3);
    const writer = new OutcomeWriter(t!.service.ctx);
    writer.push({ kind: 'succeeded', delivery: a!, status: 204, signal: 'fast' });
    writer.push({
      kind: 'retry',
      delivery: b!,
      status: 500,
      error: 'HTTP 500',
      gone: false,
      signal: 'congested',
      pauseUntil: null,
      retryAt: Date.now() + 60_000,
      firstHeaders: '{"hook-id":"x"}',
    });
    // A stale outcome (an attempt number the row has moved past) is ignored.
    writer.push({
      kind: 'succeeded',
      delivery: { ...c!, attempts: c!.attempts - 1 },
      status: 200,
      signal: 'fast',
    });
    await writer.close();
    const db = t!.service.ctx.db;
    expect(await getDelivery(db, a!.id)).toMatchObject({ status: 'succeeded', last_status: 204 });
    expect(await getDelivery(db, b!.id)).toMatchObject({
      status: 'pending',
      last_status: 500,
      last_error: 'HTTP 500',
      first_headers: '{"hook-id":"x"}',
    });
    expect(await getDelivery(db, c!.id)).toMatchObject({ status: 'delivering' });
    const stats = await db.all<{ succeeded: number; failed: number }>(
      'SELECT succeeded, failed FROM delivery_stats',
    );
    expect(stats.map((s) => [Number(s.succeeded), Number(s.failed)])).toEqual([[1, 1]]);
    // The queue counts what the fence let through: a and b are no longer in flight, c still is, and b
    // is queued again for its retry.
    const queue = await db.one<{ in_flight: number; queued: number }>(
      'SELECT in_flight, queued FROM endpoint_queues WHERE endpoint_id = $1',
      [a!.endpoint_id],
    );
    expect([Number(queue?.in_flight), Number(queue?.queued)]).toEqual([1, 1]);
  });

  it('close() waits for a write that is already under way', async () => {
    const [delivery] = await claimed(1);
    const ctx: Context = { ...t!.service.ctx, db: slowTransactions(t!.service.ctx.db, 300) };
    const writer = new OutcomeWriter(ctx);
    writer.push({ kind: 'succeeded', delivery: delivery!, status: 200, signal: 'fast' });
    // Once the flush timer has fired the queue is empty, and the write waits on its transaction.
    await eventually(() => writer.pending === 0);
    await writer.close();
    expect(await getDelivery(t!.service.ctx.db, delivery!.id)).toMatchObject({ status: 'succeeded' });
  });

  it.each([
    ['unkeyed', undefined],
    ['keyed', 'user_1'],
  ])(
    'a write of %s successes claims the room it frees where the store claims with them, and answers it',
    async (_, key) => {
      t = await startTestService(kind);
      await createEndpoint(t, { url: 'http://127.0.0.1:9/unused', events: ['*'] });
      for (let i = 0; i < 2; i++) await emit(t, 'user.updated', { i }, 'acme', key);
      await fanOutBatch(t.service.ctx);
      const { ctx } = t.service;
      const now = Date.now();
      const [first] = await claimDeliveries(ctx.db, { now, leaseUntil: now + 60_000, limit: 1, ceiling: 8 });
      const batch: Outcome[] = [{ kind: 'succeeded', delivery: first!, status: 200, signal: 'fast' }];
      const claims = claimsWithWrite(ctx.db, batch);
      // SQLite claims with every flush; PostgreSQL with a flush that ends a line's head.
      expect(claims).toBe(kind === 'sqlite' || key !== undefined);
      const { claimed } = await writeOutcomes(ctx, batch, 5);
      expect(await getDelivery(ctx.db, first!.id)).toMatchObject({ status: 'succeeded' });
      // The other delivery: taken by the write itself (SQLite), or left for the claim loop.
      expect(claimed.map((c) => c.id)).toHaveLength(claims ? 1 : 0);
      const rows = await ctx.db.all<{ status: string }>(`SELECT status FROM deliveries WHERE id <> $1`, [
        first!.id,
      ]);
      expect(rows.map((r) => r.status)).toEqual([claims ? 'delivering' : 'pending']);
    },
  );
});
