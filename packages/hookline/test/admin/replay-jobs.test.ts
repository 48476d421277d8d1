// Bulk replay as a job (docs/contract.md §4.3): the request answers at once, real delivery workers run
// the job in paced batches, and a real subscriber receives each dead letter again with its hook-id.
// The workers here are made by the tests, so they can be stopped mid-job and replaced.
import { afterEach, describe, expect, it } from 'vitest';
import { REPLAY_QUEUE_BOUND, runReplayBatch } from '../../src/engine/replay-batch.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { claimReplayJob, getReplayJob } from '../../src/store/replay-jobs.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint } from '../delivery/support.js';

interface JobJson {
  id: string;
  status: 'running' | 'done' | 'failed';
  count: number;
  replayed: number;
  skipped: number;
  failed: number;
  error: string | null;
  created_at: string;
  finished_at: string | null;
}

/**
 * Dead letters for the backlog test: enough that the bound, not a lack of work, holds the job back
 * for most of its run. Each is made the real way (emitted, delivered, refused), which is most of the
 * test's time, so no more than that.
 */
const LETTERS = 3 * REPLAY_QUEUE_BOUND;

describe.each(STORE_KINDS)('bulk-replay jobs on %s', (kind) => {
  let t: TestService | undefined;
  let r: Receiver | undefined;
  const workers: DeliveryWorker[] = [];

  afterEach(async () => {
    for (const w of workers.splice(0)) await w.stop(1000);
    await r?.close();
    await t?.close();
    r = t = undefined;
  });

  const startWorker = async () => {
    const w = new DeliveryWorker(t!.service.ctx, { pollIntervalMs: 50, reapIntervalMs: 200 });
    workers.push(w);
    await w.start();
    return w;
  };
  const stopWorker = async (w: DeliveryWorker, graceMs = 10_000) => {
    workers.splice(workers.indexOf(w), 1);
    await w.stop(graceMs);
  };
  const admin = (method: string, url: string, body?: unknown) =>
    t!.call(method, url, t!.keys.instance_manager, body);
  const job = async (id: string) => {
    const res = await admin('GET', `/v1/admin/replays/${id}`);
    expect(res.statusCode, res.body).toBe(200);
    return res.json<JobJson>();
  };
  const done = (id: string, timeoutMs = 120_000) =>
    eventually(async () => {
      const j = await job(id);
      return j.status !== 'running' && j;
    }, timeoutMs);
  const scalar = async (sql: string, params: string[] = []) =>
    Number((await t!.service.ctx.db.one<{ n: number | string }>(sql, params))?.n ?? 0);
  /** Replay deliveries per dead letter of the endpoint: exactly one each means no duplicates. */
  const replaysPerLetter = async (endpointId: string) =>
    t!.service.ctx.db.all<{ id: string; n: number | string }>(
      `SELECT dl.id, (SELECT COUNT(*) FROM deliveries d WHERE d.replay_of = dl.id) AS n
       FROM dead_letters dl WHERE dl.endpoint_id = $1`,
      [endpointId],
    );

  /** `n` real dead letters: events emitted through the API to a subscriber answering 500, no retries. */
  async function deadLetters(
    n: number,
    orderingKey?: string,
  ): Promise<{ endpointId: string; hookIds: Set<string>; emitted: string[] }> {
    t = await startTestService(kind, { env: { HOOKLINE_MAX_RETRIES: '0' } });
    r = await startReceiver(() => ({ status: 500, body: 'down' }));
    const endpoint = await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const w = await startWorker();
    const emitted: string[] = [];
    // Keyed events one at a time, so their emit order is known; others 50 at once.
    const width = orderingKey ? 1 : 50;
    for (let start = 0; start < n; start += width) {
      const answers = await Promise.all(
        Array.from({ length: Math.min(width, n - start) }, (_, i) =>
          t!.call('POST', '/v1/events', t!.keys.producer, {
            tenant_id: 'acme',
            type: 'user.updated',
            data: { userId: `user_${start + i}` },
            ...(orderingKey ? { ordering_key: orderingKey } : {}),
          }),
        ),
      );
      for (const a of answers) emitted.push(a.json<{ id: string }>().id);
    }
    const hookIds = new Set(emitted);
    await eventually(
      async () =>
        (await scalar('SELECT COUNT(*) AS n FROM dead_letters WHERE endpoint_id = $1', [endpoint.id])) === n,
      120_000,
    );
    await stopWorker(w);
    r.requests.length = 0;
    return { endpointId: endpoint.id, hookIds, emitted };
  }

  it('answers 202 {id, count} at once; a worker runs the job to done; each arrives again with its hook-id', async () => {
    const { endpointId, hookIds } = await deadLetters(30);
    r!.respond(() => ({ status: 200 }));

    // No worker is running: the request itself replays nothing, it only records the job.
    const res = await admin('POST', '/v1/admin/dead-letters/replay', { endpoint_id: endpointId });
    expect(res.statusCode, res.body).toBe(202);
    const created = res.json<{ id: string; count: number }>();
    expect(Object.keys(created).sort()).toEqual(['count', 'id']);
    expect(created).toEqual({ id: expect.stringMatching(/^rpl_/), count: 30 });
    expect(await job(created.id)).toMatchObject({
      status: 'running',
      count: 30,
      replayed: 0,
      finished_at: null,
    });
    expect(await scalar('SELECT COUNT(*) AS n FROM deliveries WHERE replay_of IS NOT NULL')).toBe(0);

    await startWorker();
    const finished = await done(created.id);
    expect(finished).toMatchObject({
      status: 'done',
      count: 30,
      replayed: 30,
      skipped: 0,
      failed: 0,
      error: null,
    });
    expect(Date.parse(finished.finished_at!)).toBeGreaterThanOrEqual(Date.parse(finished.created_at));
    expect(Object.keys(finished).sort()).toEqual(
      ['count', 'created_at', 'error', 'failed', 'finished_at', 'id', 'replayed', 'skipped', 'status'].sort(),
    );

    const requests = await r!.waitFor(30);
    expect(new Set(requests.map((q) => String(q.headers['hook-id'])))).toEqual(hookIds);
    await eventually(
      async () =>
        (await scalar(
          "SELECT COUNT(*) AS n FROM deliveries WHERE replay_of IS NOT NULL AND status = 'succeeded'",
        )) === 30,
    );
    expect((await replaysPerLetter(endpointId)).every((row) => Number(row.n) === 1)).toBe(true);
    expect(r!.requests).toHaveLength(30);

    // Answers for unknown, malformed and foreign-role requests.
    expect((await admin('GET', '/v1/admin/replays/rpl_01ARZ3NDEKTSV4RRFFQ69G5FAV')).statusCode).toBe(404);
    expect((await admin('GET', '/v1/admin/replays/nope')).json().error.code).toBe('not_found');
    expect((await t!.call('GET', `/v1/admin/replays/${created.id}`, t!.keys.tenant)).statusCode).toBe(403);
    expect((await t!.call('GET', `/v1/admin/replays/${created.id}`, null)).statusCode).toBe(401);
    // A filter nothing matches is a job done at once.
    const none = (await admin('POST', '/v1/admin/dead-letters/replay', { tenant_id: 'nobody' })).json();
    expect(none.count).toBe(0);
    expect(await job(none.id)).toMatchObject({ status: 'done', count: 0, replayed: 0 });
  }, 240_000);

  it('a second bulk replay while the first runs skips what is under way; two workers, each record replayed once', async () => {
    const { endpointId, hookIds } = await deadLetters(300);
    r!.respond(() => ({ status: 200 }));
    // 100 attempts a second: the first job is still running (paced) when the second starts.
    const patched = await t!.call('PATCH', `/v1/webhooks/${endpointId}`, t!.keys.tenant, { rate_limit: 100 });
    expect(patched.statusCode, patched.body).toBe(200);
    // Two workers take turns on the two jobs (on PostgreSQL, each batch in its own connection).
    await startWorker();
    await startWorker();
    const first = (await admin('POST', '/v1/admin/dead-letters/replay', { endpoint_id: endpointId })).json();
    await eventually(async () => (await job(first.id)).replayed > 0);
    const second = (await admin('POST', '/v1/admin/dead-letters/replay', { tenant_id: 'acme' })).json();
    expect((await job(first.id)).status).toBe('running');
    expect(second.count).toBe(300);

    const [a, b] = [await done(first.id), await done(second.id)];
    expect(a.status).toBe('done');
    expect(b.status).toBe('done');
    // Whichever job reached a record first replayed it; the other skipped it.
    expect(a.replayed + b.replayed).toBe(300);
    expect(a.skipped + b.skipped).toBe(300);
    expect(a.failed + b.failed).toBe(0);
    expect(b.skipped).toBeGreaterThan(0);
    expect((await replaysPerLetter(endpointId)).map((row) => Number(row.n))).toEqual(Array(300).fill(1));
    await r!.waitFor(300, 30_000);
    await eventually(
      async () =>
        (await scalar(
          "SELECT COUNT(*) AS n FROM deliveries WHERE replay_of IS NOT NULL AND status = 'succeeded'",
        )) === 300,
      30_000,
    );
    expect(r!.requests).toHaveLength(300);
    expect(new Set(r!.requests.map((q) => String(q.headers['hook-id'])))).toEqual(hookIds);
  }, 300_000);

  it(`keeps each endpoint's backlog within ${REPLAY_QUEUE_BOUND} while replaying ${LETTERS} to a slow subscriber`, async () => {
    const { endpointId, hookIds } = await deadLetters(LETTERS);
    r!.respond(() => ({ status: 200, delayMs: 50 }));
    await startWorker();
    const { id, count } = (
      await admin('POST', '/v1/admin/dead-letters/replay', { endpoint_id: endpointId })
    ).json();
    expect(count).toBe(LETTERS);
    // The endpoint's queue row, sampled as fast as the database answers, for the whole job.
    const samples: number[] = [];
    for (;;) {
      const q = await t!.service.ctx.db.one<{ queued: number | string; in_flight: number | string }>(
        'SELECT queued, in_flight FROM endpoint_queues WHERE endpoint_id = $1',
        [endpointId],
      );
      samples.push(Number(q!.queued) + Number(q!.in_flight));
      if ((await getReplayJob(t!.service.ctx.db, id))!.status !== 'running') break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await job(id)).toMatchObject({ status: 'done', replayed: LETTERS });
    expect(samples.length).toBeGreaterThan(20);
    expect(Math.max(...samples)).toBeLessThanOrEqual(REPLAY_QUEUE_BOUND);
    // The bound was what held the job back, not a lack of work.
    expect(Math.max(...samples)).toBeGreaterThanOrEqual(REPLAY_QUEUE_BOUND / 2);
    await r!.waitFor(LETTERS, 120_000);
    expect(new Set(r!.requests.map((q) => String(q.headers['hook-id'])))).toEqual(hookIds);
  }, 360_000);

  it('a worker stopped mid-job gives the job back; another finishes it without duplicates', async () => {
    const { endpointId, hookIds } = await deadLetters(400);
    r!.respond(() => ({ status: 200 }));
    await t!.call('PATCH', `/v1/webhooks/${endpointId}`, t!.keys.tenant, { rate_limit: 100 });
    const a = await startWorker();
    const { id } = (await admin('POST', '/v1/admin/dead-letters/replay', { endpoint_id: endpointId })).json();
    await eventually(async () => (await job(id)).replayed >= 100);
    await stopWorker(a);
    const stopped = (await getReplayJob(t!.service.ctx.db, id))!;
    expect(stopped.status).toBe('running');
    expect(stopped.replayed).toBeLessThan(400);
    expect(stopped.lease_owner).toBeNull();

    await startWorker();
    expect(await done(id)).toMatchObject({ status: 'done', replayed: 400, skipped: 0, failed: 0 });
    expect((await replaysPerLetter(endpointId)).map((row) => Number(row.n))).toEqual(Array(400).fill(1));
    await r!.waitFor(400, 120_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(r!.requests).toHaveLength(400);
    expect(new Set(r!.requests.map((q) => String(q.headers['hook-id'])))).toEqual(hookIds);
  }, 300_000);

  it("replays of keyed dead letters join the back of their key's line and arrive in order", async () => {
    const { endpointId, emitted } = await deadLetters(12, 'user_7');
    r!.respond(() => ({ status: 200, delayMs: 10 }));
    await startWorker();
    const { id } = (await admin('POST', '/v1/admin/dead-letters/replay', { endpoint_id: endpointId })).json();
    expect(await done(id)).toMatchObject({ status: 'done', replayed: 12 });
    const replays = await t!.service.ctx.db.all<{ ordering_seq: number | string }>(
      'SELECT ordering_seq FROM deliveries WHERE replay_of IS NOT NULL',
    );
    const originals = await t!.service.ctx.db.one<{ n: number | string }>(
      'SELECT MAX(ordering_seq) AS n FROM deliveries WHERE replay_of IS NULL',
    );
    expect(replays).toHaveLength(12);
    expect(Math.min(...replays.map((row) => Number(row.ordering_seq)))).toBeGreaterThan(Number(originals!.n));
    // One at a time, in the order the originals were emitted (and died).
    const received = await r!.waitFor(12, 120_000);
    expect(received.map((q) => q.headers['hook-id'])).toEqual(emitted);
  }, 180_000);

  it('a worker that froze past its lease cannot write another batch once another worker took the job', async () => {
    const { endpointId } = await deadLetters(50);
    const ctx = t!.service.ctx;
    const { id } = (await admin('POST', '/v1/admin/dead-letters/replay', { endpoint_id: endpointId })).json();
    const now = Date.now();
    expect((await claimReplayJob(ctx.db, 'worker-a', now, now + 1000)).job?.id).toBe(id);
    // Held: nobody else takes it while the lease lasts.
    expect((await claimReplayJob(ctx.db, 'worker-b', now + 500, now + 1500)).job).toBeNull();
    expect(await runReplayBatch(ctx, id, 'worker-a', { batchSize: 10 })).toEqual({
      state: 'progress',
      added: 10,
    });
    // worker-a freezes; its lease (renewed by that batch) runs out and worker-b takes over.
    const later = Date.now() + 60_000;
    expect((await claimReplayJob(ctx.db, 'worker-b', later, later + 60_000)).job?.id).toBe(id);
    expect(await runReplayBatch(ctx, id, 'worker-a', { batchSize: 10 })).toEqual({ state: 'lost', added: 0 });
    expect((await getReplayJob(ctx.db, id))!.replayed).toBe(10);
    let result;
    do result = await runReplayBatch(ctx, id, 'worker-b', { batchSize: 10 });
    while (result.state === 'progress');
    expect(result.state).toBe('done');
    expect(await getReplayJob(ctx.db, id)).toMatchObject({
      status: 'done',
      replayed: 50,
      cursor_id: expect.any(String),
    });
    expect((await replaysPerLetter(endpointId)).map((row) => Number(row.n))).toEqual(Array(50).fill(1));
  }, 180_000);
});
