// Refused connections in `hookline serve`, whose attempts are made in the delivery thread
// (docs/operators.md, "Refused connections"): the thread warns once for the endpoint, and its count
// reaches the API thread's /metrics, which adds the thread's counters to its own.
import { afterEach, describe, expect, it } from 'vitest';
import { createApiKeys, startProcess } from '../helpers/process.js';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { testEnv } from '../helpers/service.js';
import { createTestDatabase } from '../helpers/stores.js';

describe('refused connections in hookline serve on sqlite', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it("warns once from the delivery thread and counts every refused attempt in serve's /metrics", async () => {
    const database = await createTestDatabase('sqlite');
    cleanup.push(() => database.drop());
    const subscriber = await startReceiver();
    cleanup.push(() => subscriber.close());
    // An egress proxy that is down: every attempt fails before reaching the subscriber.
    const env = testEnv(database, { HOOKLINE_EGRESS_PROXY_URL: 'http://127.0.0.1:1' });
    const { tenantKey, producerKey } = await createApiKeys(env);
    const serve = await startProcess(['serve'], env);
    cleanup.push(() => serve.kill('SIGKILL'));
    const call = async (path: string, key: string, body: unknown) => {
      const res = await fetch(`${serve.address}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBeLessThan(300);
      return (await res.json()) as { id: string };
    };
    const endpoint = await call('/v1/webhooks', tenantKey, { url: subscriber.url, events: ['*'] });
    for (const userId of ['user_1', 'user_2'])
      await call('/v1/events', producerKey, { tenant_id: 'acme', type: 'user.updated', data: { userId } });

    // HOOKLINE_MAX_RETRIES=3: two deliveries of four attempts each.
    await eventually(async () => {
      const text = await (await fetch(`${serve.address}/metrics`)).text();
      return text.includes('hookline_delivery_refusals_total{reason="proxy"} 8');
    }, 30_000);
    const metrics = await (await fetch(`${serve.address}/metrics`)).text();
    expect(metrics).toMatch(/^hookline_delivery_refusals_total\{reason="ssrf"\} 0$/m);
    const warnings = serve
      .output()
      .split('\n')
      .filter((line) => line.includes('"reason":"proxy"') && line.includes(endpoint.id));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 40, endpoint_id: endpoint.id, reason: 'proxy' });
  }, 60_000);
});
