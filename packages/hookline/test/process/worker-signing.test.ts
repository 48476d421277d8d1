// What a `hookline worker` process sends and keeps, on each store: every attempt signed over its own
// timestamp, and a dead letter holding attempt 1's headers as sent. The real process, not an
// in-process worker: on SQLite it sends from its sender thread, which cannot run the TypeScript
// sources the in-process suites use, so this is where a worker's attempts cross to their thread and
// their outcomes come back; on PostgreSQL it sends from its main thread (delivery/sender-thread.ts, `sendsFromThread`).
import { verifyWebhook } from '@hookline/consumer';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { createApiKeys, postJson, runCli, startProcess } from '../helpers/process.js';
import { testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase } from '../helpers/stores.js';

describe.each(STORE_KINDS)('hookline worker on %s', (kind) => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  it('signs each attempt over its own timestamp and keeps attempt 1 as sent in the dead letter', async () => {
    const database = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const env = testEnv(database, { HOOKLINE_MAX_RETRIES: '2' });
    const { tenantKey, producerKey } = await createApiKeys(env);
    const operatorKey = (await runCli(['keys', 'create', '--role', 'instance_manager'], env)).stdout.trim();
    // Attempt 1 is answered just after a second boundary, so the later attempts carry a later
    // timestamp, and headers reused from attempt 1 would show.
    const r = await startReceiver((_req, i) => ({
      status: 503,
      body: `down #${i}`,
      delayMs: i === 0 ? 1000 - (Date.now() % 1000) + 20 : 0,
    }));
    cleanup.push(() => r.close());

    const api = await startProcess(['serve', '--no-worker'], env);
    cleanup.push(() => api.kill());
    const endpoint = (await (
      await postJson(api.address, '/v1/webhooks', tenantKey, { url: r.url, events: ['user.*'] })
    ).json()) as { id: string; signing_secret: string };
    const worker = await startProcess(['worker'], env);
    cleanup.push(() => worker.kill());
    const emitted = await postJson(api.address, '/v1/events', producerKey, {
      tenant_id: 'acme',
      type: 'user.created',
      data: { userId: 'user_1' },
    });
    expect(emitted.status).toBe(202);
    const { id: hookId } = (await emitted.json()) as { id: string };

    await r.waitFor(3, 30_000);
    for (const req of r.requests) {
      const event = verifyWebhook({
        secret: endpoint.signing_secret,
        headers: req.headers,
        body: req.body,
        now: req.at,
      });
      expect(event.id).toBe(hookId);
      expect(event.timestamp).toBe(Number(req.headers['hook-timestamp']));
    }
    expect(r.requests[2]!.headers['hook-timestamp']).not.toBe(r.requests[0]!.headers['hook-timestamp']);

    const letter = await eventually(async () => {
      const res = await fetch(`${api.address}/v1/admin/dead-letters`, {
        headers: { authorization: `Bearer ${operatorKey}` },
      });
      const list = (await res.json()) as { data: { id: string }[] };
      return list.data[0];
    }, 30_000);
    const shown = (await (
      await fetch(`${api.address}/v1/admin/dead-letters/${letter.id}`, {
        headers: { authorization: `Bearer ${operatorKey}` },
      })
    ).json()) as { hook_id: string; body: string; headers: Record<string, string> };
    const first = r.requests[0]!;
    expect(shown.hook_id).toBe(hookId);
    expect(shown.body).toBe(first.body);
    for (const name of ['hook-id', 'hook-timestamp', 'hook-signature', 'content-type', 'user-agent']) {
      expect(shown.headers[name], name).toBe(first.headers[name]);
    }
  }, 60_000);
});
