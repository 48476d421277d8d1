// HOOKLINE_TENANT_RATE_LIMIT over HTTP (api/rate-limit.ts, docs/configuration.md): a tenant key gets
// twice the rate in a burst, then 429 with Retry-After in the one error shape; other keys and roles
// are not touched by it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';

const RATE = 3;
/** The window api/rate-limit.ts counts a key's requests in. */
const WINDOW_MS = 2000;

describe('tenant rate limit over HTTP', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService('sqlite', { env: { HOOKLINE_TENANT_RATE_LIMIT: String(RATE) } });
  });
  afterAll(async () => t.close());

  it('answers 429 with Retry-After to a tenant key past its budget, and only to it', async () => {
    const started = Date.now();
    let accepted = 0;
    let limited;
    for (let i = 0; i < 100 && !limited; i++) {
      const res = await t.call('GET', '/v1/webhooks', t.keys.tenant);
      if (res.statusCode === 200) accepted++;
      else limited = res;
    }
    // A machine so busy that the burst outlasted one window may have started a second one; the
    // count is exact otherwise.
    if (Date.now() - started < WINDOW_MS) expect(accepted).toBe(2 * RATE);
    else expect(accepted).toBeGreaterThanOrEqual(2 * RATE);
    expect(limited?.statusCode).toBe(429);
    const retryAfter = Number(limited?.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(WINDOW_MS / 1000);
    expect(limited?.json()).toEqual({
      error: { code: 'rate_limited', message: `too many requests; retry in ${retryAfter} s` },
    });
    // The library's own X-RateLimit-* headers are not part of the API.
    expect(Object.keys(limited?.headers ?? {}).filter((h) => h.startsWith('x-ratelimit'))).toEqual([]);
    // Still limited: a request refused is not a request served.
    expect((await t.call('GET', '/v1/webhooks', t.keys.tenant)).statusCode).toBe(429);

    // Another tenant's key has its own budget.
    expect((await t.call('GET', '/v1/webhooks', await t.keyFor('tenant', 'globex'))).statusCode).toBe(200);
    // Producers and instance managers are not limited, nor are public routes.
    for (let i = 0; i < 4 * RATE; i++) {
      const res = await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.updated',
        data: {},
      });
      expect(res.statusCode).toBe(202);
      expect((await t.call('GET', '/v1/webhooks?tenant_id=acme', t.keys.instance_manager)).statusCode).toBe(
        200,
      );
      expect((await t.call('GET', '/healthz', null)).statusCode).toBe(200);
    }
  });

  it('refuses a limited tenant before reading its body', async () => {
    const key = await t.keyFor('tenant', 'initech');
    for (let i = 0; i < 2 * RATE; i++) await t.call('GET', '/v1/webhooks', key);
    // Not JSON: were the body parsed first, this would be 400 invalid_json.
    const res = await t.call('POST', '/v1/webhooks', key, '{not json');
    expect(res.statusCode).toBe(429);
    expect(res.json().error.code).toBe('rate_limited');
  });
});
