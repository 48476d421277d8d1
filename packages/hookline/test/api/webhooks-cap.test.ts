// HOOKLINE_MAX_ENDPOINTS_PER_TENANT (docs/configuration.md): a tenant has at most that many endpoints
// that are not deleted; one more, by create or by restore, is 409 endpoint_limit_reached, and
// concurrent creates at the cap cannot all pass.
import { afterEach, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, expectEndpoint, expectError } from './support.js';

const CAP = 3;

describe.each(STORE_KINDS)('the endpoint cap per tenant on %s', (kind) => {
  let t: TestService | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  const start = async () =>
    (t = await startTestService(kind, { env: { HOOKLINE_MAX_ENDPOINTS_PER_TENANT: String(CAP) } }));
  const body = { url: 'https://hooks.example.com/in', events: ['*'] };

  it('allows N endpoints, refuses N+1 with 409; deleted ones do not count, restoring one does', async () => {
    const s = await start();
    const ids: string[] = [];
    for (let i = 0; i < CAP; i++) ids.push((await createEndpoint(s)).id);
    const refused = await s.call('POST', '/v1/webhooks', s.keys.tenant, body);
    expectError(refused, 409, 'endpoint_limit_reached');
    expect(refused.json().error.message).toContain(`${CAP}`);
    expect(refused.json().error.message).toContain('HOOKLINE_MAX_ENDPOINTS_PER_TENANT');
    // Another tenant has its own count.
    const other = await s.keyFor('tenant', 'globex');
    expect((await s.call('POST', '/v1/webhooks', other, body)).statusCode).toBe(201);

    // Deleting one frees a place; restoring it while the place is taken again is refused.
    expectEndpoint(await s.call('DELETE', `/v1/webhooks/${ids[0]}`, s.keys.tenant));
    await createEndpoint(s);
    expectError(
      await s.call('POST', `/v1/webhooks/${ids[0]}/restore`, s.keys.tenant),
      409,
      'endpoint_limit_reached',
    );
    expectEndpoint(await s.call('DELETE', `/v1/webhooks/${ids[1]}`, s.keys.tenant));
    expect(expectEndpoint(await s.call('POST', `/v1/webhooks/${ids[0]}/restore`, s.keys.tenant)).status).toBe(
      'active',
    );
  });

  it('concurrent creates at the cap: exactly the free places are taken', async () => {
    const s = await start();
    await createEndpoint(s);
    const answers = await Promise.all(
      Array.from({ length: 12 }, () => s.call('POST', '/v1/webhooks', s.keys.tenant, body)),
    );
    const codes = answers.map((a) => a.statusCode).sort();
    expect(codes.filter((c) => c === 201)).toHaveLength(CAP - 1);
    expect(codes.filter((c) => c === 409)).toHaveLength(12 - (CAP - 1));
    const list = await s.call('GET', '/v1/webhooks?limit=100', s.keys.tenant);
    expect(list.json().data).toHaveLength(CAP);
  });
});
