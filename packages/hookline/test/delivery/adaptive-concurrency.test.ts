// The adaptive in-flight limit against real subscribers, on both stores (docs/architecture.md,
// "Adaptive concurrency"): it tells overload from errors. A quick subscriber failing 10 % of requests
// at random keeps its limit near the ceiling; one whose answers take longer the more requests are in
// flight sees it come down. Each test awaits every delivery's success, then reads the stored limit.
import { afterEach, describe, expect, it } from 'vitest';
import { INITIAL_SLOW_START_THRESHOLD } from '../../src/store/endpoint-queues.js';
import { eventually, startReceiver, type Responder } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { seeded } from './ordering-support.js';
import { createEndpoint } from './support.js';

const CEILING = 32;

describe.each(STORE_KINDS)('adaptive concurrency on %s', (kind) => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  /** A service and one endpoint at a subscriber answering with `responder`; counts first successes. */
  async function setUp(responder: Responder) {
    const succeeded = new Set<string>();
    const receiver = await startReceiver((request, index) => {
      const reply = responder(request, index);
      if ((reply.status ?? 200) < 300) succeeded.add(String(request.headers['hook-id']));
      return reply;
    });
    cleanup.push(() => receiver.close());
    const t = await startTestService(kind, {
      worker: true,
      env: {
        HOOKLINE_ENDPOINT_CONCURRENCY: String(CEILING),
        HOOKLINE_MAX_RETRIES: '40',
        HOOKLINE_RETRY_MAX_MS: '50',
      },
    });
    cleanup.push(() => t.close());
    const endpoint = await createEndpoint(t, { url: receiver.url, events: ['*'] });
    return { t, endpoint: endpoint.id, succeeded };
  }

  /** Emits `events` unkeyed events, 50 at a time, and waits until each has succeeded once. */
  async function deliverAll(t: TestService, succeeded: Set<string>, events: number): Promise<void> {
    for (let i = 0; i < events; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, j) => {
          const res = await t.call('POST', '/v1/events', t.keys.producer, {
            tenant_id: 'acme',
            type: 'user.updated',
            data: { n: i + j },
          });
          expect(res.statusCode, res.body).toBe(202);
        }),
      );
    }
    await eventually(() => succeeded.size >= events, 60_000);
  }

  const queueOf = async (t: TestService, endpointId: string) => {
    const row = await t.service.ctx.db.one<Record<string, unknown>>(
      'SELECT concurrency_limit, slow_start_threshold, answer_ms_floor FROM endpoint_queues WHERE endpoint_id = $1',
      [endpointId],
    );
    return {
      limit: Number(row!.concurrency_limit),
      threshold: Number(row!.slow_start_threshold),
      floor: Number(row!.answer_ms_floor),
    };
  };

  it('a quick subscriber failing 10 % of requests at random keeps the limit near its ceiling', async () => {
    const random = seeded(7);
    const { t, endpoint, succeeded } = await setUp(() => ({ status: random() < 0.1 ? 500 : 200 }));
    // The limit as the deliveries go: the queue row, read every 20 ms while they run.
    const limits: number[] = [];
    let reading = true;
    const read = (async () => {
      while (reading) {
        limits.push((await queueOf(t, endpoint)).limit);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await deliverAll(t, succeeded, 600);
    reading = false;
    await read;
    // Each 500 halved the limit before (at most once a second): it averaged about a third of the
    // ceiling here. Now they leave it alone. A decrease is still possible if the test machine stalls
    // the worker long enough to look like a queue, so the bound is the target: half the
    // ceiling on average.
    const mean = limits.reduce((a, b) => a + b, 0) / limits.length;
    expect(mean, `limits read: ${limits.length}`).toBeGreaterThanOrEqual(CEILING / 2);
  }, 90_000);

  it('a subscriber whose answers take longer the more are in flight sees the limit come down', async () => {
    // Two workers, 25 ms a request, the rest wait in line: beyond 2 in flight every request adds
    // 12.5 ms to the answer time and nothing to the throughput.
    const freeAt = [0, 0];
    const { t, endpoint, succeeded } = await setUp(() => {
      const now = Date.now();
      const worker = freeAt.indexOf(Math.min(...freeAt));
      const done = Math.max(now, freeAt[worker]!) + 25;
      freeAt[worker] = done;
      return { status: 200, delayMs: done - now };
    });
    await deliverAll(t, succeeded, 300);
    const q = await queueOf(t, endpoint);
    // It came down (the threshold follows each decrease) and stays well below the ceiling: answers
    // within twice the floor (25 ms, more on a busy test machine) plus 50 ms allow about 8 in flight.
    expect(q.threshold).toBeLessThan(INITIAL_SLOW_START_THRESHOLD);
    expect(q.limit).toBeLessThanOrEqual(CEILING / 2);
    expect(q.floor).toBeGreaterThanOrEqual(24);
  }, 90_000);
});
