// The worker's safety nets for its queues (docs/architecture.md, "Endpoint queues"): an endpoint
// queue whose next due time was lost while deliveries wait is found by the reaper's round, and the
// deliveries go out; on PostgreSQL the round also vacuums the queue table (docs/scaling.md, "Vacuum").
import { afterEach, describe, expect, it } from 'vitest';
import { fanOutBatch } from '../../src/engine/fanout.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { reconcileNextDue } from '../../src/store/deliveries.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, deliveriesTo, emit, queueOf } from './support.js';

describe.each(STORE_KINDS)('queue repair on %s', (kind) => {
  let t: TestService | undefined;
  let r: Receiver | undefined;
  let worker: DeliveryWorker | undefined;
  afterEach(async () => {
    await worker?.stop(1000);
    await r?.close();
    await t?.close();
    worker = r = t = undefined;
  });

  /** Three deliveries queued for one endpoint whose queue has lost its next due time. */
  async function lostNextDue(): Promise<string> {
    t = await startTestService(kind, { worker: false });
    r = await startReceiver();
    const endpoint = await createEndpoint(t, { url: r.url, events: ['*'] });
    for (let i = 0; i < 3; i++) await emit(t, 'user.updated', { i });
    // SQLite fans out at emit; on PostgreSQL the workers do.
    if (kind === 'postgres') await fanOutBatch(t.service.ctx);
    await t.service.ctx.db.run('UPDATE endpoint_queues SET next_due_at = NULL WHERE endpoint_id = $1', [
      endpoint.id,
    ]);
    expect(await queueOf(t, endpoint.id)).toMatchObject({ queued: 3, next_due_at: null });
    return endpoint.id;
  }

  it('the reaper’s repair brings the next due time back to the earliest pending delivery, and only it', async () => {
    const endpointId = await lostNextDue();
    const before = await queueOf(t!, endpointId);
    const earliest = Math.min(...(await deliveriesTo(t!, endpointId)).map((d) => Number(d.next_attempt_at)));
    expect(await t!.service.ctx.db.transaction((tx) => reconcileNextDue(tx))).toBe(1);
    // ready_at, the ready index's key, follows next_due_at (docs/architecture.md, "Endpoint queues").
    expect(await queueOf(t!, endpointId)).toEqual({ ...before, next_due_at: earliest, ready_at: earliest });
    // Nothing left to repair.
    expect(await t!.service.ctx.db.transaction((tx) => reconcileNextDue(tx))).toBe(0);
  });

  it('delivers what waits behind a lost next due time', async () => {
    const endpointId = await lostNextDue();
    worker = new DeliveryWorker(t!.service.ctx, { pollIntervalMs: 50, reapIntervalMs: 200 });
    await worker.start();
    await r!.waitFor(3, 60_000);
    expect(r!.requests).toHaveLength(3);
    // Each outcome is written after its answer: wait for the last, then read them all.
    await eventually(
      async () =>
        (await queueOf(t!, endpointId))?.queued === 0 && (await queueOf(t!, endpointId))?.in_flight === 0,
      60_000,
    );
    const rows = await deliveriesTo(t!, endpointId);
    expect(rows.map((d) => d.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  });

  it.runIf(kind === 'postgres')(
    'the reaper’s round vacuums the queue table (the dead versions of its rows)',
    async () => {
      await lostNextDue();
      const { db } = t!.service.ctx;
      const vacuums = async () =>
        Number(
          (
            await db.one<{ n: string }>(
              "SELECT vacuum_count AS n FROM pg_stat_user_tables WHERE relid = 'endpoint_queues'::regclass",
            )
          )?.n ?? 0,
        );
      expect(await vacuums()).toBe(0);
      worker = new DeliveryWorker(t!.service.ctx, { pollIntervalMs: 50, reapIntervalMs: 200 });
      await worker.start();
      await eventually(async () => (await vacuums()) > 0, 60_000);
    },
  );
});
