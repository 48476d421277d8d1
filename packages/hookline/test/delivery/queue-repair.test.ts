// The worker's safety nets for its queues (docs/architecture.md, "Endpoint queues"): an endpoint
// queue whose next due time was lost while deliveries wait is found by the reaper's round, and the
// deliveries go out.
import { afterEach, describe, expect, it } from 'vitest';
import { fanOutBatch } from '../../src/engine/fanout.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, emit, queueOf } from './support.js';

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

  it('delivers what waits behind a lost next due time', async () => {
    t = await startTestService(kind, { worker: false });
    r = await startReceiver();
    const endpoint = await createEndpoint(t, r.url, ['*']);
    for (let i = 0; i < 3; i++) await emit(t, 'user.updated', { i });
    // SQLite fans out at emit; on PostgreSQL the workers do.
    if (kind === 'postgres') await fanOutBatch(t.service.ctx);
    expect(await queueOf(t, endpoint.id)).toMatchObject({ queued: 3 });
    await t.service.ctx.db.run('UPDATE endpoint_queues SET next_due_at = NULL WHERE endpoint_id = $1', [
      endpoint.id,
    ]);

    worker = new DeliveryWorker(t.service.ctx, { pollIntervalMs: 50, reapIntervalMs: 200 });
    await worker.start();
    await eventually(() => r!.requests.length === 3);
  });
});
