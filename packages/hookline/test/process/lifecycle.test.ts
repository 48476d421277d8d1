// Process roles as an operator runs them: `serve` (delivery in its own thread), `serve --no-worker` and
// `worker`, their health routes, and a clean exit on SIGTERM.
import { readdirSync, readFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { DELIVERY_THREAD_NICE } from '../../src/delivery/thread-priority.js';
import { createApiKeys, postJson, startProcess, type RunningProcess } from '../helpers/process.js';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase } from '../helpers/stores.js';

/** Each thread's nice value in process `pid`, by thread id (Linux's /proc/<pid>/task/<tid>/stat). */
function threadNiceValues(pid: number): Map<number, number> {
  const nice = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // The fields after the command's closing parenthesis start at the third; nice is the nineteenth.
    nice.set(Number(tid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
  }
  return nice;
}

describe.each(STORE_KINDS)('process roles on %s', (kind) => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  it('a worker serves health, readiness and metrics but no API, and exits 0 on SIGTERM', async () => {
    const database = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const worker: RunningProcess = await startProcess(['worker'], testEnv(database));
    cleanup.push(() => worker.kill('SIGKILL'));
    expect((await fetch(`${worker.address}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${worker.address}/readyz`)).json()).toEqual({ status: 'ready' });
    // The process's own figures are registered with the registry at start (metrics.ts); two scrapes agree.
    for (let scrape = 0; scrape < 2; scrape++) {
      const metrics = await fetch(`${worker.address}/metrics`);
      expect(metrics.status).toBe(200);
      const text = await metrics.text();
      expect(text).toContain('hookline_queue_depth');
      expect(text).toContain('hookline_process_cpu_seconds_total');
    }
    const missing = await fetch(`${worker.address}/v1/webhooks`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 'not_found' } });
    const posted = await fetch(`${worker.address}/healthz`, { method: 'POST' });
    expect(posted.status).toBe(405);
    expect(await posted.json()).toMatchObject({ error: { code: 'method_not_allowed' } });
    expect(await worker.kill('SIGTERM')).toBe(0);
  });

  it('serve delivers from its delivery thread, counts those attempts on /metrics, and exits 0 on SIGTERM', async () => {
    const database = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const env = testEnv(database);
    const receiver = await startReceiver();
    cleanup.push(() => receiver.close());
    const { tenantKey, producerKey } = await createApiKeys(env);
    const serve: RunningProcess = await startProcess(['serve'], env);
    cleanup.push(() => serve.kill('SIGKILL'));
    const post = (path: string, key: string, body: unknown) => postJson(serve.address, path, key, body);
    expect((await post('/v1/webhooks', tenantKey, { url: receiver.url, events: ['*'] })).status).toBe(201);
    for (let i = 0; i < 3; i++) {
      expect(
        (await post('/v1/events', producerKey, { tenant_id: 'acme', type: 'user.updated', data: { i } }))
          .status,
      ).toBe(202);
    }
    await receiver.waitFor(3);
    if (process.platform === 'linux') {
      // The delivery thread runs at a lower CPU priority, the API thread at the process's own
      // (delivery/thread-priority.ts).
      const inherited = getPriority();
      const nice = threadNiceValues(serve.child.pid!);
      expect(nice.get(serve.child.pid!)).toBe(inherited);
      expect([...nice.values()]).toContain(Math.max(inherited, DELIVERY_THREAD_NICE));
    }
    // The attempts were made in the delivery thread; the API thread's /metrics adds its figures.
    await eventually(async () =>
      /hookline_delivery_attempts_total\{outcome="succeeded"\} 3\b/.test(
        await (await fetch(`${serve.address}/metrics`)).text(),
      ),
    );
    expect(await serve.kill('SIGTERM')).toBe(0);
  });

  it('an API-only server answers the API and exits 0 on SIGTERM', async () => {
    const database = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const api: RunningProcess = await startProcess(['serve', '--no-worker'], testEnv(database));
    cleanup.push(() => api.kill('SIGKILL'));
    expect((await fetch(`${api.address}/v1/webhooks`)).status).toBe(401);
    expect((await fetch(`${api.address}/readyz`)).status).toBe(200);
    expect(await api.kill('SIGTERM')).toBe(0);
  });
});
