// A worker killed with SIGKILL in the middle of an attempt loses nothing: its lease expires and another
// worker delivers the same message (same hook-id) to completion. An API killed during ingest loses no
// acknowledged event.
import { afterEach, describe, expect, it } from 'vitest';
import { startEventStream, tally } from '../helpers/event-stream.js';
import { startReceiver, eventually, type Receiver } from '../helpers/receiver.js';
import { testEnv } from '../helpers/service.js';
import { createApiKeys, postJson, startProcess, type RunningProcess } from '../helpers/process.js';
import { STORE_KINDS, createTestDatabase, type TestDatabase } from '../helpers/stores.js';

describe.each(STORE_KINDS)('crash recovery on %s', (kind) => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  it('re-delivers with the same hook-id after a worker is SIGKILLed mid-attempt', async () => {
    const database: TestDatabase = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const env = testEnv(database, { HOOKLINE_DELIVERY_TIMEOUT_MS: '1000', HOOKLINE_LOG_LEVEL: 'info' });

    const { tenantKey, producerKey } = await createApiKeys(env);
    expect(tenantKey).toMatch(/^hk_t_/);

    // The first request hangs (the worker is killed while waiting); later ones succeed.
    const receiver: Receiver = await startReceiver((_req, i) => (i === 0 ? { hang: true } : { status: 200 }));
    cleanup.push(() => receiver.close());

    const api: RunningProcess = await startProcess(['serve', '--no-worker'], env);
    cleanup.push(() => api.kill());
    const call = async (path: string, key: string, body: unknown) => {
      const res = await postJson(api.address, path, key, body);
      return { status: res.status, json: (await res.json()) as Record<string, string> };
    };
    const endpoint = await call('/v1/webhooks', tenantKey, { url: receiver.url, events: ['user.*'] });
    expect(endpoint.status).toBe(201);

    const first: RunningProcess = await startProcess(['worker'], env);
    cleanup.push(() => first.kill('SIGKILL'));
    const emitted = await call('/v1/events', producerKey, {
      tenant_id: 'acme',
      type: 'user.created',
      data: { userId: 'user_crash' },
    });
    expect(emitted.status).toBe(202);

    await receiver.waitFor(1);
    await first.kill('SIGKILL');

    const db = database.open();
    cleanup.push(() => db.close());
    const row = await db.one<{ status: string }>('SELECT status FROM deliveries');
    expect(row?.status).toBe('delivering');

    const second: RunningProcess = await startProcess(['worker'], env);
    cleanup.push(() => second.kill());
    const requests = await receiver.waitFor(2, 30_000);
    expect(requests[1]?.headers['hook-id']).toBe(emitted.json.id);
    expect(requests[0]?.headers['hook-id']).toBe(emitted.json.id);

    const done = await eventually(async () => {
      const r = await db.one<{ status: string; attempts: number }>('SELECT status, attempts FROM deliveries');
      return r?.status === 'succeeded' ? r : undefined;
    });
    expect(done.attempts).toBe(2);
    expect(await db.one('SELECT COUNT(*) AS n FROM deliveries WHERE status = $1', ['delivering'])).toEqual({
      n: 0,
    });
  }, 60_000);
});

// The API process SIGKILLed while events stream in, then started again on the same database: an event
// answered 202 was committed before the answer (docs/contract.md §4.2), so it is delivered; an event is
// never stored twice (it would arrive under two hook-ids).
describe.each(STORE_KINDS)('API killed during ingest on %s', (kind) => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  it('delivers every acknowledged event exactly under its own hook-id', async () => {
    const database = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const env = testEnv(database, { HOOKLINE_MAX_RETRIES: '20' });
    const { tenantKey, producerKey } = await createApiKeys(env);
    const receiver = await startReceiver(() => ({ status: 200 }));
    cleanup.push(() => receiver.close());

    // `serve` with its delivery thread: the kill takes ingest and attempts in flight down together.
    let api = await startProcess(['serve'], env);
    cleanup.push(() => api.kill('SIGKILL'));
    const created = await postJson(api.address, '/v1/webhooks', tenantKey, {
      url: receiver.url,
      events: ['*'],
    });
    expect(created.status).toBe(201);

    const stream = startEventStream(() => api.address, producerKey, { concurrency: 8, pauseMs: 0 });
    cleanup.push(() => stream.stop());
    await eventually(() => stream.accepted.length >= 300, 30_000);
    const failedBefore = stream.failed();
    await api.kill('SIGKILL');
    const acceptedAtKill = stream.accepted.length;
    api = await startProcess(['serve'], env);
    await eventually(() => stream.accepted.length > acceptedAtKill + 100, 30_000);
    await stream.stop();
    // Requests under way when the process died got no answer: they are the producer's to retry.
    expect(stream.failed()).toBeGreaterThan(failedBefore);

    const counts = await eventually(() => {
      const t = tally(stream.accepted, receiver.requests);
      return t.lost === 0 ? t : undefined;
    }, 60_000).catch(() => tally(stream.accepted, receiver.requests));
    console.log(`API SIGKILL during ingest (${kind}): ${counts.summary} unanswered=${stream.failed()}`);
    expect(counts.lost).toBe(0);
    expect(counts.duplicated).toBe(0);
    expect(counts.delivered).toBe(stream.accepted.length);
  }, 120_000);
});
