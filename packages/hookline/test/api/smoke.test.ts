import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';

describe.each(STORE_KINDS)('smoke on %s', (kind) => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService(kind);
  });
  afterAll(async () => t.close());

  it('creates and lists an endpoint', async () => {
    const created = await t.call('POST', '/v1/webhooks', t.keys.tenant, {
      url: 'http://127.0.0.1:9/x',
      events: ['*'],
    });
    expect(created.statusCode).toBe(201);
    const list = await t.call('GET', '/v1/webhooks', t.keys.tenant);
    expect(list.json().data).toHaveLength(1);
  });
});
