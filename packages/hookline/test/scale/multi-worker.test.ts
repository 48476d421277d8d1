// Several workers sharing one database: claims never overlap, a stale worker cannot overwrite a newer
// attempt (fencing), and on PostgreSQL a NOTIFY from another process wakes an idle worker.
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createContext, type Context } from '../../src/context.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { Emitter } from '../../src/events/emit.js';
import { createEndpoint } from '../../src/endpoints/endpoint-service.js';
import { fanOutBatch } from '../../src/engine/fanout.js';
import { claimDeliveries, completeDeliveries, reapExpiredLeases } from '../../src/store/deliveries.js';
import { MIGRATIONS, migrate } from '../../src/store/migrations/index.js';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { runCli } from '../helpers/process.js';
import { testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase, type TestDatabase } from '../helpers/stores.js';

// SQLite serves one process (plus short CLI commands beside it): its connections in one process would
// block each other's event loop, so the several-workers cases run on PostgreSQL, the scale-out store.
describe.each(STORE_KINDS)('several workers on one %s database', (kind) => {
  const scaleOut = kind === 'postgres';
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  async function setup(env: Record<string, string> = {}) {
    const database: TestDatabase = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const config = loadConfig(testEnv(database, env));
    // Each context has its own connection(s), as separate processes would.
    const contexts: Context[] = [];
    const context = async () => {
      const ctx = await createContext(config, { db: database.open(), processMetrics: false });
      contexts.push(ctx);
      cleanup.push(async () => {
        await ctx.signal.close();
        await ctx.db.close();
      });
      return ctx;
    };
    const api = await context();
    await migrate(api.db);
    return { database, config, api, context };
  }

  it.runIf(scaleOut)(
    'two workers deliver every message exactly once when nothing crashes',
    async () => {
      const { api, context } = await setup({ HOOKLINE_WORKER_CONCURRENCY: '16' });
      const receivers = await Promise.all([startReceiver(), startReceiver()]);
      cleanup.push(() => Promise.all(receivers.map((r) => r.close())));
      for (const r of receivers) await createEndpoint(api, 'acme', { url: r.url, events: ['*'] });
      const workers = [
        new DeliveryWorker(await context(), { pollIntervalMs: 20 }),
        new DeliveryWorker(await context(), { pollIntervalMs: 20 }),
      ];
      for (const w of workers) {
        await w.start();
        cleanup.push(() => w.stop(1000));
      }
      const emitter = new Emitter(api);
      const ids: string[] = [];
      for (let i = 0; i < 300; i++)
        ids.push((await emitter.emit({ tenantId: 'acme', type: 'user.updated', data: { i } })).id);
      for (const r of receivers) await r.waitFor(300, 60_000);
      await eventually(async () => {
        const row = await api.db.one<{ n: number }>(
          `SELECT COUNT(*) AS n FROM deliveries WHERE status <> 'succeeded'`,
        );
        return Number(row?.n) === 0;
      });
      for (const r of receivers) {
        const hookIds = r.requests.map((q) => q.headers['hook-id']);
        expect(hookIds).toHaveLength(300);
        expect(new Set(hookIds).size).toBe(300);
        expect([...new Set(hookIds)].sort()).toEqual([...ids].sort());
      }
    },
    90_000,
  );

  it.runIf(scaleOut)(
    'concurrent claims never hand out the same delivery twice, nor more than an endpoint’s limit',
    async () => {
      const { api, context } = await setup();
      const endpoints = [];
      for (let i = 0; i < 5; i++)
        endpoints.push(await createEndpoint(api, 'acme', { url: `http://127.0.0.1:9/${i}`, events: ['*'] }));
      const emitter = new Emitter(api);
      for (let i = 0; i < 40; i++)
        await emitter.emit({ tenantId: 'acme', type: 'user.updated', data: { i } });
      while ((await fanOutBatch(api)).messages > 0);
      const claimers = await Promise.all([context(), context(), context()]);
      const claimed: { id: string; endpoint_id: string }[] = [];
      await Promise.all(
        claimers.map(async (ctx) => {
          // A claim may find every ready endpoint locked by another claimer: only a few empty
          // answers in a row mean there is nothing left within the limits.
          for (let empty = 0; empty < 5;) {
            const now = Date.now();
            const batch = await claimDeliveries(ctx.db, {
              now,
              leaseUntil: now + 60_000,
              limit: 16,
              ceiling: 1000,
            });
            if (batch.length === 0) empty++;
            else empty = 0;
            claimed.push(...batch);
          }
        }),
      );
      // Each endpoint's adaptive limit starts at 8 and holds across the three claimers together.
      expect(claimed).toHaveLength(5 * 8);
      expect(new Set(claimed.map((c) => c.id)).size).toBe(5 * 8);
      for (const e of endpoints) expect(claimed.filter((c) => c.endpoint_id === e.id)).toHaveLength(8);
      const queues = await api.db.all<{ in_flight: number; queued: number }>(
        'SELECT in_flight, queued FROM endpoint_queues',
      );
      expect(queues.map((q) => [Number(q.in_flight), Number(q.queued)])).toEqual(Array(5).fill([8, 32]));
    },
    60_000,
  );

  it('a worker whose lease expired cannot record an outcome over a newer attempt', async () => {
    const { api } = await setup();
    await createEndpoint(api, 'acme', { url: 'http://127.0.0.1:9/x', events: ['*'] });
    await new Emitter(api).emit({ tenantId: 'acme', type: 'user.updated', data: {} });
    await fanOutBatch(api);
    const t0 = Date.now();
    const [stale] = await claimDeliveries(api.db, { now: t0, leaseUntil: t0 + 10, limit: 1, ceiling: 1 });
    expect(stale?.attempts).toBe(1);
    expect(await api.db.transaction((tx) => reapExpiredLeases(tx, t0 + 1000, 1))).toBe(1);
    const [fresh] = await claimDeliveries(api.db, {
      now: t0 + 1000,
      leaseUntil: t0 + 60_000,
      limit: 1,
      ceiling: 1,
    });
    expect(fresh?.id).toBe(stale?.id);
    expect(fresh?.attempts).toBe(2);
    // The stale worker finishes late: its write is fenced off.
    expect(
      await completeDeliveries(api.db, [{ id: stale?.id ?? '', attempt: 1, status: 200 }], t0 + 2000),
    ).toEqual([]);
    const row = await api.db.one<{ status: string; attempts: number }>(
      'SELECT status, attempts FROM deliveries',
    );
    expect(row).toEqual({ status: 'delivering', attempts: 2 });
    expect(
      (await completeDeliveries(api.db, [{ id: fresh?.id ?? '', attempt: 2, status: 200 }], t0 + 2000)).map(
        (r) => r.id,
      ),
    ).toEqual([fresh?.id]);
  });

  it.runIf(scaleOut)(
    'an emit in one process wakes an idle worker in another (LISTEN/NOTIFY)',
    async () => {
      const { api, context } = await setup();
      const receiver = await startReceiver();
      cleanup.push(() => receiver.close());
      await createEndpoint(api, 'acme', { url: receiver.url, events: ['*'] });
      // Polling alone would take a minute: only the notification can deliver within the wait below.
      const worker = new DeliveryWorker(await context(), { pollIntervalMs: 60_000, reapIntervalMs: 60_000 });
      await worker.start();
      cleanup.push(() => worker.stop(1000));
      await new Promise((r) => setTimeout(r, 200));
      await new Emitter(api).emit({ tenantId: 'acme', type: 'user.updated', data: {} });
      await receiver.waitFor(1, 10_000);
    },
    30_000,
  );

  /** The kinds of wake-up another process hears, and a way to await one. */
  async function wakesHeardBy(listener: Context) {
    const heard: string[] = [];
    const waiters: (() => void)[] = [];
    cleanup.push(
      await listener.signal.onWake((kind) => {
        heard.push(kind);
        for (const w of waiters.splice(0)) w();
      }),
    );
    const until = async (kind: string) => {
      while (!heard.includes(kind)) await new Promise<void>((resolve) => waiters.push(resolve));
    };
    return { heard, until };
  }

  it.runIf(scaleOut)(
    "a fan-out wakes the other workers only for deliveries its own worker's claim has no room for",
    async () => {
      // Capacity 2 (concurrency 1 plus its buffer): one delivery fits, three do not.
      const { api, context } = await setup({ HOOKLINE_WORKER_CONCURRENCY: '1' });
      const receiver = await startReceiver();
      cleanup.push(() => receiver.close());
      await createEndpoint(api, 'acme', { url: receiver.url, events: ['*'] });
      const wakes = await wakesHeardBy(api);
      const start = async () => {
        const ctx = await context();
        const worker = new DeliveryWorker(ctx, { pollIntervalMs: 60_000, reapIntervalMs: 60_000 });
        await worker.start();
        cleanup.push(() => worker.stop(1000));
        return { ctx, worker };
      };

      const first = await start();
      await new Emitter(api).emit({ tenantId: 'acme', type: 'user.updated', data: {} });
      await receiver.waitFor(1, 30_000);
      // Notifications arrive in commit order: one sent now arrives after any the fan-out sent.
      first.ctx.signal.notify('replay');
      await wakes.until('replay');
      expect(wakes.heard).not.toContain('claim');
      await first.worker.stop(1000);

      // Three messages wait when the next worker starts: its first fan-out makes three deliveries.
      for (let i = 0; i < 3; i++)
        await new Emitter(api).emit({ tenantId: 'acme', type: 'user.updated', data: { i } });
      await start();
      await wakes.until('claim');
      await receiver.waitFor(4, 30_000);
    },
    60_000,
  );

  it('migrations are safe when several processes start at once', async () => {
    const database = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const env = testEnv(database);
    const results = await Promise.all([1, 2, 3, 4].map(() => runCli(['migrate'], env)));
    expect(results.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    // Exactly one process applied the migrations; the others found them done.
    expect(results.filter((r) => /applied/.test(r.stderr))).toHaveLength(1);
    const db = database.open();
    cleanup.push(() => db.close());
    const rows = await db.all<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(rows.map((r) => Number(r.version))).toEqual(MIGRATIONS.map((m) => m.version));
  }, 60_000);
});
