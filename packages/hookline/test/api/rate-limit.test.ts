import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/api/rate-limit.js';
import { startTestService, type TestService } from '../helpers/service.js';

describe('RateLimiter', () => {
  it('allows a burst of twice the rate, then refills at the rate', () => {
    const limiter = new RateLimiter(5);
    const t0 = 1_000_000;
    const results = Array.from({ length: 11 }, () => limiter.take('k', t0).ok);
    expect(results.filter(Boolean)).toHaveLength(10);
    expect(limiter.take('k', t0)).toEqual({ ok: false, retryAfterSeconds: 1 });
    expect(limiter.take('k', t0 + 200).ok).toBe(true);
    expect(limiter.take('other', t0).ok).toBe(true);
  });
});

describe('tenant rate limit over HTTP', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService('sqlite', { env: { HOOKLINE_TENANT_RATE_LIMIT: '3' } });
  });
  afterAll(async () => t.close());

  it('answers 429 with Retry-After to a tenant key past its budget, and only to it', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++)
      statuses.push((await t.call('GET', '/v1/webhooks', t.keys.tenant)).statusCode);
    expect(statuses.slice(0, 6)).toEqual([200, 200, 200, 200, 200, 200]);
    const limited = await t.call('GET', '/v1/webhooks', t.keys.tenant);
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error.code).toBe('rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await t.call('GET', '/v1/webhooks', await t.keyFor('tenant', 'globex'))).statusCode).toBe(200);
    for (let i = 0; i < 20; i++) {
      const res = await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.updated',
        data: {},
      });
      expect(res.statusCode).toBe(202);
    }
  });
});
