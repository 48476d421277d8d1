// hookline benchmarks: `npm run bench`. Prints one table; compare the ratios, which are measured side
// by side in the same run (the machine is small and noisy, absolute numbers wander).
//
//   emit latency      p50/p99 of POST /v1/events over HTTP with 0, 100 healthy and 100 hanging
//                     endpoints subscribed: the ratio to 0 endpoints should stay near 1
//   delivery rate     deliveries per second to fast local subscribers, and the same with a hanging
//                     endpoint beside them: the ratio should stay near 1 (no head-of-line blocking)
//   memory            heap growth while delivering, per 1,000 deliveries
//
// Stores: SQLite always; PostgreSQL too when reachable at HOOKLINE_BENCH_POSTGRES_URL
// (default postgres://postgres@127.0.0.1:5432/test).
import { mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig, startService } from '../packages/hookline/dist/index.js';
import { createApiKey } from '../packages/hookline/dist/keys/api-keys.js';
import { createEndpoint } from '../packages/hookline/dist/endpoints/endpoint-service.js';
import { PgDb } from '../packages/hookline/dist/store/postgres/pg-db.js';

const PG_URL = process.env.HOOKLINE_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const EMITS = Number(process.env.BENCH_EMITS ?? 400);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 3000);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 20000);

async function receiver(mode) {
  let count = 0;
  const waiters = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (mode === 'hang') return;
      count++;
      for (const w of waiters.splice(0))
        if (count >= w.n) w.resolve();
        else waiters.push(w);
      res.writeHead(200).end('ok');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}/hook`,
    get count() {
      return count;
    },
    until: (n) => (count >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }))),
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(r);
      }),
  };
}

async function database(kind) {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(path.join(tmpdir(), 'hookline-bench-'));
    return {
      url: `sqlite:${path.join(dir, 'bench.db')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  await c.query(`CREATE SCHEMA ${schema}`);
  await c.end();
  return {
    url: PG_URL,
    processUrl: `${PG_URL}?options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    db: () => new PgDb({ connectionString: PG_URL, schema }),
    drop: async () => {
      const d = new pg.Client({ connectionString: PG_URL });
      await d.connect();
      await d.query(`DROP SCHEMA ${schema} CASCADE`);
      await d.end();
    },
  };
}

async function service(kind, { worker, env = {} }) {
  const store = await database(kind);
  const environment = {
    HOOKLINE_DATABASE_URL: store.url,
    HOOKLINE_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    HOOKLINE_ALLOW_PRIVATE_NETWORKS: 'true',
    HOOKLINE_LOG_LEVEL: 'silent',
    HOOKLINE_PORT: '0',
    HOOKLINE_WORKER_ADMIN_PORT: '0',
    HOOKLINE_DELIVERY_TIMEOUT_MS: '60000',
    ...env,
  };
  const config = loadConfig(environment);
  const svc = await startService(config, {
    api: true,
    worker,
    listen: true,
    processMetrics: false,
    shutdownGraceMs: 100,
    ...(store.db ? { db: store.db() } : {}),
  });
  const producer = (await createApiKey(svc.ctx, { role: 'producer' })).key;
  const children = [];
  return {
    svc,
    producer,
    /** A `hookline worker` process on the same database, as in the scale-out layout. */
    spawnWorker: () => {
      const child = spawn(process.execPath, ['packages/hookline/bin/hookline.js', 'worker'], {
        env: { ...process.env, ...environment, HOOKLINE_DATABASE_URL: store.processUrl ?? store.url },
        stdio: 'ignore',
      });
      children.push(child);
    },
    close: async () => {
      for (const c of children) c.kill('SIGKILL');
      await svc.close();
      await store.drop();
    },
  };
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** Emit latency with `endpoints` subscribers answering as `mode`, delivered by `workers`. */
async function emitLatency(kind, endpoints, mode, workers) {
  const s = await service(kind, { worker: workers === 'in-process' });
  const r = mode === 'none' ? null : await receiver(mode);
  for (let i = 0; i < endpoints; i++) await createEndpoint(s.svc.ctx, 'acme', { url: r.url, events: ['*'] });
  if (workers === 'process') s.spawnWorker();
  const body = JSON.stringify({ tenant_id: 'acme', type: 'user.updated', data: { name: 'bench' } });
  const headers = { authorization: `Bearer ${s.producer}`, 'content-type': 'application/json' };
  const times = [];
  for (let i = 0; i < EMITS + 50; i++) {
    const t0 = performance.now();
    const res = await fetch(`${s.svc.address}/v1/events`, { method: 'POST', headers, body });
    await res.arrayBuffer();
    if (res.status !== 202) throw new Error(`emit answered ${res.status}`);
    if (i >= 50) times.push(performance.now() - t0);
  }
  await s.close();
  await r?.close();
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}

async function deliveryRate(kind, withHanging, subscribers = 1) {
  const s = await service(kind, { worker: false });
  const healthy = await receiver('ok');
  const hanging = await receiver('hang');
  for (let i = 0; i < subscribers; i++)
    await createEndpoint(s.svc.ctx, 'acme', { url: healthy.url, events: ['*'] });
  if (withHanging) await createEndpoint(s.svc.ctx, 'acme', { url: hanging.url, events: ['*'] });
  for (let i = 0; i < DELIVERIES / subscribers; i++) {
    await s.svc.emitter.emit({ tenantId: 'acme', type: 'user.updated', data: { i } });
  }
  // Measure delivery alone: the backlog is written first, then a worker is started.
  global.gc?.();
  const heapBefore = process.memoryUsage().heapUsed;
  const { DeliveryWorker } = await import('../packages/hookline/dist/delivery/worker.js');
  const worker = new DeliveryWorker(s.svc.ctx, { pollIntervalMs: 50 });
  const t0 = performance.now();
  await worker.start();
  await healthy.until(DELIVERIES);
  const seconds = (performance.now() - t0) / 1000;
  global.gc?.();
  const heapAfter = process.memoryUsage().heapUsed;
  await worker.stop(100);
  await s.close();
  await healthy.close();
  await hanging.close();
  return { rate: DELIVERIES / seconds, heapPer1000: ((heapAfter - heapBefore) / DELIVERIES) * 1000 };
}

/**
 * Steady state behind a stuck endpoint: a hanging endpoint with `backlog` deliveries queued has been
 * failing long enough for its circuit to open; then deliveries per second to a healthy endpoint.
 */
async function rateBehindOpenCircuit(kind, backlog) {
  const s = await service(kind, {
    worker: false,
    env: {
      HOOKLINE_DELIVERY_TIMEOUT_MS: '500',
      HOOKLINE_CIRCUIT_BREAK_AFTER_MS: '1000',
      HOOKLINE_MAX_RETRIES: '100',
    },
  });
  const healthy = await receiver('ok');
  const hanging = await receiver('hang');
  await createEndpoint(s.svc.ctx, 'acme', { url: healthy.url, events: ['user.updated'] });
  const stuck = await createEndpoint(s.svc.ctx, 'acme', { url: hanging.url, events: ['user.deleted'] });
  for (let i = 0; i < backlog; i++)
    await s.svc.emitter.emit({ tenantId: 'acme', type: 'user.deleted', data: { i } });
  const { DeliveryWorker } = await import('../packages/hookline/dist/delivery/worker.js');
  // Let the stuck endpoint fail until its circuit opens, then queue the healthy work and measure it.
  const warmup = new DeliveryWorker(s.svc.ctx, { pollIntervalMs: 50 });
  await warmup.start();
  for (;;) {
    const row = await s.svc.ctx.db.one('SELECT circuit_open_until AS c FROM endpoints WHERE id = $1', [
      stuck.id,
    ]);
    if (row?.c != null) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await warmup.stop(0);
  // "Failing for a while" in production includes autovacuum's ANALYZE of the re-parked rows; without
  // it PostgreSQL plans the claim on statistics from before the backlog existed.
  if (kind === 'postgres') await s.svc.ctx.db.run('ANALYZE deliveries');
  for (let i = 0; i < DELIVERIES; i++)
    await s.svc.emitter.emit({ tenantId: 'acme', type: 'user.updated', data: { i } });
  const worker = new DeliveryWorker(s.svc.ctx, { pollIntervalMs: 50 });
  const t0 = performance.now();
  await worker.start();
  await healthy.until(DELIVERIES);
  const seconds = (performance.now() - t0) / 1000;
  await worker.stop(100);
  await s.close();
  await healthy.close();
  await hanging.close();
  return DELIVERIES / seconds;
}

async function pgReachable() {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
    await c.end();
    return true;
  } catch {
    return false;
  }
}

const kinds = ['sqlite', ...((await pgReachable()) ? ['postgres'] : [])];
const rows = [];
const fmt = (n, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : '-');
for (const kind of kinds) {
  process.stderr.write(`${kind}: emit latency…\n`);
  // The contract: emit latency does not depend on how many endpoints subscribe or how they behave.
  // Measured as deployed at scale (workers in their own process), then embedded (one process).
  const none = await emitLatency(kind, 0, 'none', 'none');
  const cases = [
    ['100 healthy endpoints, worker process', await emitLatency(kind, 100, 'ok', 'process')],
    ['100 hanging endpoints, worker process', await emitLatency(kind, 100, 'hang', 'process')],
    ['100 healthy endpoints, same process', await emitLatency(kind, 100, 'ok', 'in-process')],
    ['100 hanging endpoints, same process', await emitLatency(kind, 100, 'hang', 'in-process')],
  ];
  for (const q of ['p50', 'p99']) {
    rows.push([kind, `emit ${q} ms, no endpoints`, fmt(none[q], 2), '1.00']);
    for (const [label, r] of cases)
      rows.push([kind, `emit ${q} ms, ${label}`, fmt(r[q], 2), fmt(r[q] / none[q], 2)]);
  }
  process.stderr.write(`${kind}: delivery rate…\n`);
  const alone = await deliveryRate(kind, false);
  const beside = await deliveryRate(kind, true);
  const wide = await deliveryRate(kind, false, 10);
  const behind = await deliveryRate(kind, true, 1, BACKLOG);
  const steady = await rateBehindOpenCircuit(kind, BACKLOG);
  rows.push([kind, 'deliveries/s to 1 fast subscriber', fmt(alone.rate, 0), '1.00']);
  rows.push([
    kind,
    'deliveries/s to it beside a hanging endpoint',
    fmt(beside.rate, 0),
    fmt(beside.rate / alone.rate, 2),
  ]);
  rows.push([kind, 'deliveries/s to 10 fast subscribers', fmt(wide.rate, 0), fmt(wide.rate / alone.rate, 2)]);
  rows.push([
    kind,
    `deliveries/s beside a hanging endpoint with ${BACKLOG} queued`,
    fmt(behind.rate, 0),
    fmt(behind.rate / alone.rate, 2),
  ]);
  rows.push([kind, '  …and once its circuit has opened', fmt(steady, 0), fmt(steady / alone.rate, 2)]);
  rows.push([kind, 'heap retained KiB per 1,000 deliveries', fmt(alone.heapPer1000 / 1024, 0), '-']);
}

const header = ['store', 'measure', 'value', 'ratio'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
const line = (r) =>
  r.map((c, i) => (i >= 2 ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join('  ');
console.log(
  `\nhookline bench (${EMITS} emits per case, ${DELIVERIES} deliveries per case, node ${process.version})\n`,
);
console.log(line(header));
console.log(widths.map((w) => '-'.repeat(w)).join('  '));
for (const r of rows) console.log(line(r));
