// Process roles as an operator runs them: `serve --no-worker` and `worker`, their health routes, and a
// clean exit on SIGTERM.
import { afterEach, describe, expect, it } from 'vitest';
import { startProcess, type RunningProcess } from '../helpers/process.js';
import { testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase } from '../helpers/stores.js';

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
    expect(await (await fetch(`${worker.address}/metrics`)).text()).toContain('hookline_queue_depth');
    expect((await fetch(`${worker.address}/v1/webhooks`)).status).toBe(404);
    expect(await worker.kill('SIGTERM')).toBe(0);
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
