// PostgreSQL goes down mid-run (a crash: immediate stop, recovery from the WAL) and comes back on the
// same address. The API and the worker are not restarted: both report the outage on /readyz while it
// lasts and ready again after, and every event acknowledged with 202, before or after, is delivered.
import { afterEach, describe, expect, it } from 'vitest';
import { startEventStream, tally } from '../helpers/event-stream.js';
import { PRIVATE_POSTGRES, startPrivatePostgres } from '../helpers/private-postgres.js';
import { createApiKeys, postJson, startProcess, type RunningProcess } from '../helpers/process.js';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { testEnv } from '../helpers/service.js';
import type { TestDatabase } from '../helpers/stores.js';

const readyz = async (p: RunningProcess) => {
  try {
    return (await fetch(`${p.address}/readyz`, { signal: AbortSignal.timeout(10_000) })).status;
  } catch {
    return 0; // no answer at all is not ready either
  }
};

describe.runIf(PRIVATE_POSTGRES)('PostgreSQL restarted under a running service', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  it('recovers without restarting the API or the worker, and loses no acknowledged event', async () => {
    const cluster = await startPrivatePostgres();
    cleanup.push(() => cluster.destroy());
    const env = testEnv({ url: cluster.url } as TestDatabase, { HOOKLINE_MAX_RETRIES: '20' });
    const { tenantKey, producerKey } = await createApiKeys(env);
    const receiver = await startReceiver(() => ({ status: 200, delayMs: 5 }));
    cleanup.push(() => receiver.close());

    const api = await startProcess(['serve', '--no-worker'], env);
    cleanup.push(() => api.kill());
    const worker = await startProcess(['worker'], env);
    cleanup.push(() => worker.kill());
    const created = await postJson(api.address, '/v1/webhooks', tenantKey, {
      url: receiver.url,
      events: ['*'],
    });
    expect(created.status).toBe(201);

    const stream = startEventStream(() => api.address, producerKey, { concurrency: 2 });
    cleanup.push(() => stream.stop());
    await receiver.waitFor(50, 30_000);
    expect([await readyz(api), await readyz(worker)]).toEqual([200, 200]);

    await cluster.stop('immediate');
    const acceptedBefore = stream.accepted.length;
    // The outage is seen, and stays seen while it lasts.
    await eventually(async () => (await readyz(api)) !== 200 && (await readyz(worker)) !== 200, 20_000);
    const failedBefore = stream.failed();
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 500));
      // 0 (no answer) here has meant a process crashed on the lost connections.
      expect(await readyz(api), api.output().slice(-3000)).toBe(503);
      expect(await readyz(worker), worker.output().slice(-3000)).toBe(503);
    }
    // Nothing is acknowledged that could not be stored.
    expect(stream.failed()).toBeGreaterThan(failedBefore);
    const acceptedDuringOutage = stream.accepted.length - acceptedBefore;

    await cluster.start();
    await eventually(async () => (await readyz(api)) === 200 && (await readyz(worker)) === 200, 30_000);
    // Emits are acknowledged again, and what they carry is delivered by the same worker.
    const resumedAt = stream.accepted.length;
    await eventually(() => stream.accepted.length > resumedAt + 50, 30_000);
    await stream.stop();

    const counts = await eventually(() => {
      const t = tally(stream.accepted, receiver.requests);
      return t.lost === 0 ? t : undefined;
    }, 60_000).catch(() => tally(stream.accepted, receiver.requests));
    console.log(
      `postgres restart: ${counts.summary} refused-or-failed=${stream.failed()} ` +
        `accepted-during-outage=${acceptedDuringOutage}`,
    );
    expect(counts.lost).toBe(0);
    expect(counts.duplicated).toBe(0);
    expect(api.child.exitCode).toBeNull();
    expect(worker.child.exitCode).toBeNull();
  }, 180_000);
});
