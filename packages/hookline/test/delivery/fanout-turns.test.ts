// A worker that finds a large backlog waiting for fan-out starts delivering while it fans out: on
// SQLite a fan-out batch never leaves the event loop, so without a turn between batches the attempts
// already claimed would wait for the whole backlog (docs/architecture.md, "Fan-out").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMIT_FANOUT_ENDPOINTS } from '../../src/engine/fanout.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { countAwaitingFanout } from '../../src/store/messages.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint } from './support.js';

const BACKLOG = 5000;

describe.each(STORE_KINDS)('fan-out of a backlog on %s', (kind) => {
  let t: TestService;
  let receiver: Receiver;

  beforeAll(async () => {
    t = await startTestService(kind, { worker: false });
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await t.close();
  });

  it('delivers the first events before the whole backlog is fanned out', async () => {
    await createEndpoint(t, { url: receiver.url, events: ['user.*'] });
    // More endpoints than an emit fans out itself: the backlog waits for the worker's fan-out.
    for (let i = 0; i < EMIT_FANOUT_ENDPOINTS; i++)
      await createEndpoint(t, { url: receiver.url, events: ['organization.*'] });
    const emits = Array.from({ length: BACKLOG }, (_, i) =>
      t.service.emitter.emit({ tenantId: 'acme', type: 'user.updated', data: { i } }),
    );
    await Promise.all(emits);
    const awaiting = () => countAwaitingFanout(t.service.ctx.db);
    expect(await awaiting()).toBe(BACKLOG);

    // Read as soon as the first delivery arrives: how much of the backlog still waits for fan-out.
    let atFirstDelivery: Promise<number> | null = null;
    receiver.respond(() => {
      atFirstDelivery ??= awaiting();
      return { status: 204 };
    });
    const worker = new DeliveryWorker(t.service.ctx, { pollIntervalMs: 50 });
    await worker.start();
    try {
      await receiver.waitFor(1, 20_000);
      expect(await atFirstDelivery).toBeGreaterThan(0);
      await receiver.waitFor(BACKLOG, 60_000);
      expect(await awaiting()).toBe(0);
    } finally {
      await worker.stop(2000);
    }
  });
});
