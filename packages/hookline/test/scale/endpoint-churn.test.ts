// Tenants change endpoints while workers record outcomes of those endpoints' deliveries: the two
// kinds of transaction touch the same rows in different orders, and neither may fail for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';

describe.each(STORE_KINDS)('endpoint changes during delivery on %s', (kind) => {
  let t: TestService;
  let receiver: Receiver;
  beforeAll(async () => {
    t = await startTestService(kind, {
      worker: true,
      env: {
        HOOKLINE_RETRY_BASE_MS: '5',
        HOOKLINE_RETRY_MAX_MS: '10',
        HOOKLINE_MAX_RETRIES: '50',
        HOOKLINE_LOG_LEVEL: 'error',
      },
    });
    receiver = await startReceiver(() => ({ status: 500 }));
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  it('deletes, restores and patches endpoints whose deliveries are failing and retrying', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      ids.push(
        (await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: receiver.url, events: ['*'] })).json().id,
      );
    }
    for (let i = 0; i < 30; i++) {
      await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.updated',
        data: { i },
      });
    }
    await receiver.waitFor(100);
    const statuses: number[] = [];
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        ids.flatMap((id) => [
          t.call('PATCH', `/v1/webhooks/${id}`, t.keys.tenant, { description: `round ${round}` }),
          t.call('DELETE', `/v1/webhooks/${id}`, t.keys.tenant),
        ]),
      );
      statuses.push(...answers.map((a) => a.statusCode));
      const restored = await Promise.all(
        ids.map((id) => t.call('POST', `/v1/webhooks/${id}/restore`, t.keys.tenant)),
      );
      statuses.push(...restored.map((a) => a.statusCode));
    }
    // A PATCH that lands after its DELETE is a 409 (endpoint_deleted); nothing is a 500.
    expect(statuses.filter((s) => s >= 500)).toEqual([]);
    expect(statuses.filter((s) => s !== 200 && s !== 409)).toEqual([]);
  }, 60_000);
});
