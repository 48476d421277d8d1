// The scale-out shape for real: one API process and two worker processes on PostgreSQL, a few
// thousand events to several subscribers, and one worker SIGKILLed in the middle. Every delivery
// arrives at least once, none is lost, none is left `delivering`, duplicates stay rare.
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { createApiKeys, postJson, startProcess, type RunningProcess } from '../helpers/process.js';
import { testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase } from '../helpers/stores.js';

const EVENTS = 2000;
const WORKER_CONCURRENCY = 64;
const SUBSCRIBERS = 3;

describe.runIf(STORE_KINDS.includes('postgres'))('scale-out on PostgreSQL', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  it(`delivers ${EVENTS} events to ${SUBSCRIBERS} subscribers across a worker crash`, async () => {
    const database = await createTestDatabase('postgres');
    cleanup.push(() => database.drop());
    const env = testEnv(database, {
      // Long enough that no attempt times out on a loaded machine: a timed-out attempt the subscriber
      // did receive is retried, a duplicate the crash bound below does not count (a full-suite run
      // once saw 70 against 64). The killed worker's leases then expire after 20 s.
      HOOKLINE_DELIVERY_TIMEOUT_MS: '10000',
      HOOKLINE_MAX_RETRIES: '20',
      HOOKLINE_LOG_LEVEL: 'info',
      HOOKLINE_WORKER_CONCURRENCY: String(WORKER_CONCURRENCY),
    });
    const { tenantKey, producerKey } = await createApiKeys(env);

    const receivers: Receiver[] = [];
    for (let i = 0; i < SUBSCRIBERS; i++) {
      // A little latency, so attempts are genuinely in flight when the worker dies.
      const r = await startReceiver(() => ({ status: 200, delayMs: Math.floor(Math.random() * 5) }));
      receivers.push(r);
      cleanup.push(() => r.close());
    }

    const api: RunningProcess = await startProcess(['serve', '--no-worker'], env);
    cleanup.push(() => api.kill());
    const post = async (path: string, key: string, body: unknown) => {
      const res = await postJson(api.address, path, key, body);
      expect(res.status).toBeLessThan(300);
      return (await res.json()) as { id: string };
    };
    for (const r of receivers) await post('/v1/webhooks', tenantKey, { url: r.url, events: ['*'] });

    const workers: RunningProcess[] = [];
    for (let i = 0; i < 2; i++) {
      const w = await startProcess(['worker'], env);
      workers.push(w);
      cleanup.push(() => w.kill('SIGKILL'));
    }

    const ids: string[] = [];
    let next = 0;
    const emitOne = async (): Promise<void> => {
      while (next < EVENTS) {
        const i = next++;
        ids.push(
          (await post('/v1/events', producerKey, { tenant_id: 'acme', type: 'user.updated', data: { i } }))
            .id,
        );
      }
    };
    const emitting = Promise.all(Array.from({ length: 16 }, emitOne));

    // Kill a worker while deliveries are flowing.
    await receivers[0]?.waitFor(EVENTS / 4, 60_000);
    await workers[0]?.kill('SIGKILL');
    await emitting;
    expect(ids).toHaveLength(EVENTS);

    const db = database.open();
    cleanup.push(() => db.close());
    await eventually(async () => {
      const row = await db.one<{ n: number }>(
        `SELECT COUNT(*) AS n FROM deliveries WHERE status <> 'succeeded'`,
      );
      const total = await db.one<{ n: number }>('SELECT COUNT(*) AS n FROM deliveries');
      return Number(row?.n) === 0 && Number(total?.n) === EVENTS * SUBSCRIBERS;
    }, 120_000);

    const expected = new Set(ids);
    let duplicates = 0;
    for (const r of receivers) {
      const counts = new Map<string, number>();
      for (const q of r.requests) {
        const id = String(q.headers['hook-id']);
        counts.set(id, (counts.get(id) ?? 0) + 1);
      }
      // Every message arrived at every subscriber, and nothing else did.
      expect(new Set(counts.keys())).toEqual(expected);
      // At-least-once: only attempts cut off by the crash repeat, each a handful of times at most.
      expect(Math.max(...counts.values())).toBeLessThanOrEqual(3);
      duplicates += r.requests.length - counts.size;
    }
    // Only what the killed worker had in flight (at most its concurrency) is sent twice; what it had
    // claimed but not yet started was never sent.
    expect(duplicates).toBeLessThanOrEqual(WORKER_CONCURRENCY);
    const delivering = await db.one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM deliveries WHERE status = 'delivering'`,
    );
    expect(Number(delivering?.n)).toBe(0);
  }, 180_000);
});
