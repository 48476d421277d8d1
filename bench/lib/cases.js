// The benchmark cases. Each takes the run's context and returns {metrics, notes}: flat numbers keyed
// by name (the table in run.js picks them up) and short remarks keyed the same way. A case starts
// its own processes and databases and stops/removes them before it returns.
import { randomBytes } from 'node:crypto';
import * as bullmq from './bullmq.js';
import { ceiling, startCeiling } from './ceiling.js';
import { emit, startEmitter } from './emitter.js';
import { startFastifyNoop } from './fastify-noop.js';
import * as graphile from './graphile.js';
import { createEndpoints, createHookline, createSchema, pgUrlWith, queueDepth } from './hookline.js';
import { startOtlpCounter } from './otlp-counter.js';
import { freePort, stop, watchMemory } from './processes.js';
import { produce } from './producer.js';
import { E2E_BACKLOG, boundBacklog, fmt, now, sleep, summarize } from './stats.js';
import { awaitDeliveries, startSubscriber } from './subscriber.js';
import { measureSteady } from './window.js';

/**
 * Counts and time limits; `--quick` scales everything down to stay within two minutes. `deliveries`
 * is the run of every drain and end-to-end case (its steady window is the 20 %–90 % marks);
 * `sideDeliveries` that of the isolation and ordering drains.
 */
export function scale(quick) {
  return quick
    ? {
        deliveries: 4000,
        sideDeliveries: 2000,
        ingestMs: 1500,
        pacedMs: 1500,
        halfWarmupMs: 1500,
        backlog: 4000,
        backlogWarmup: 1000,
        fanoutMs: 1500,
        memoryEvents: 2000,
        budgetMs: 15_000,
        memoryBudgetMs: 8000,
        stallMs: 20_000,
        graceMs: 3000,
        oneKeyDeliveries: 500,
        rateLimitDeliveries: 300,
        producerTransactions: 1000,
        keyedMs: 20_000,
      }
    : {
        deliveries: 40_000,
        sideDeliveries: 20_000,
        ingestMs: 5000,
        pacedMs: 5000,
        halfWarmupMs: 4000,
        backlog: 100_000,
        backlogWarmup: 5000,
        fanoutMs: 10_000,
        memoryEvents: 100_000,
        budgetMs: 120_000,
        memoryBudgetMs: 240_000,
        stallMs: 60_000,
        graceMs: 15_000,
        oneKeyDeliveries: 2000,
        rateLimitDeliveries: 1200,
        producerTransactions: 20_000,
        keyedMs: 90_000,
      };
}

async function withSubscribers(modes, fn) {
  const subs = [];
  try {
    for (const mode of modes) subs.push(await startSubscriber({ port: await freePort(), mode }));
    return await fn(...subs);
  } finally {
    for (const s of subs) s.kill('SIGKILL');
  }
}

/** A fresh hookline installation (see createHookline) for the duration of `fn`. */
async function withHookline(kind, { env = {}, api } = {}, fn) {
  const hl = await createHookline(kind, env, { api });
  try {
    return await fn(hl);
  } finally {
    await hl.close();
  }
}

const limitsOf = (ctx) => ({ stallMs: ctx.scale.stallMs, budgetMs: ctx.scale.budgetMs });

/** A note for a wait that did not complete: cut short by the time budget, or stalled. */
function shortfall(ctx, r, total) {
  if (r.done) return r.duplicates ? `${fmt(r.duplicates)} duplicate deliveries` : '';
  if (r.partial) return `partial: ${fmt(r.count)} of ${fmt(total)} within the time budget`;
  return `no progress for ${fmt(ctx.scale.stallMs / 1000)} s (${fmt(r.count)} of ${fmt(total)} delivered)`;
}

/** The database a hookline installation's steady window watches: its PostgreSQL backends, or none. */
const dbOf = (hl) => (hl.kind === 'pg' ? { kind: 'pg', app: hl.app } : null);

/**
 * The figures of a steady run (lib/window.js) under prefix `p`: rate, time to the first delivery, CPU
 * µs per delivery by column (queue processes, database, subscriber, emitter, their total; `dbServer`
 * is every postgres process), WAL bytes per delivery, emit→delivery latency in the window.
 */
function steadyMetrics(p, r) {
  const cpu = r.cpu ?? {};
  const parts = [cpu.queue, cpu.db, cpu.subscriber, cpu.emitter].filter(Number.isFinite);
  return {
    [`${p}.rate`]: r.rate,
    [`${p}.first`]: r.firstMs,
    [`${p}.cpu.queue`]: cpu.queue,
    [`${p}.cpu.db`]: cpu.db,
    [`${p}.cpu.dbServer`]: cpu.dbServer,
    [`${p}.cpu.subscriber`]: cpu.subscriber,
    [`${p}.cpu.emitter`]: cpu.emitter,
    [`${p}.cpu.total`]: Number.isFinite(r.rate) ? parts.reduce((a, b) => a + b, 0) : NaN,
    [`${p}.wal`]: r.wal,
    [`${p}.latP50`]: r.latency?.p50,
    [`${p}.latP99`]: r.latency?.p99,
  };
}

/** The note of a steady run: the window's size, or the shortfall of a run that did not reach it. */
function steadyNote(ctx, r) {
  if (!r.done && Number.isFinite(r.rate))
    return `cut short: window of ${fmt(r.n)} deliveries, from the 20 % mark to the time budget's end`;
  if (!r.done) return shortfall(ctx, r, r.to);
  return [`window of ${fmt(r.n)} deliveries`, shortfall(ctx, r, r.to)].filter(Boolean).join('; ');
}

/**
 * Creates endpoints at `urls` and fills a backlog of `events` through the API process `hl.api`
 * (`serve --no-worker`): emitted over HTTP, complete when every emit has been answered 202. On SQLite
 * the emits fan out to a tenant's few endpoints themselves (docs/architecture.md, "Fan-out"), so the
 * backlog is deliveries, as BullMQ's is jobs; on PostgreSQL fan-out is left to the workers, and a
 * timed drain includes it.
 */
async function fillBacklog(
  ctx,
  hl,
  urls,
  events,
  { concurrency = 64, orderingKeys = 0, endpoint = {} } = {},
) {
  await createEndpoints(hl.api.origin, hl.tenantKey, urls, 32, endpoint);
  await emitBacklog(ctx, hl, events, { concurrency, orderingKeys });
  return hl.api;
}

/** Emits `events` through `hl.api`, 202 for every one (retrying refusals), with progress. */
async function emitBacklog(ctx, hl, events, { concurrency = 64, orderingKeys = 0 } = {}) {
  const api = hl.api;
  const t0 = now();
  const r = await emit(
    { origin: api.origin, key: hl.producerKey, total: events, concurrency, retry: true, orderingKeys },
    { onProgress: (p) => ctx.progress(`filling ${fmt(p.ok)}/${fmt(events)}`) },
  );
  if (r.ok !== events) throw new Error(`backlog fill: only ${r.ok} of ${events} emits accepted`);
  ctx.log(`backlog of ${fmt(events)} events in ${fmt((now() - t0) / 1000, 1)} s`);
}

/**
 * Drain: a backlog of `total` deliveries first (the API process stopped), then `workers` `hookline
 * worker` processes; the steady window of the deliveries, and the first one's time from their spawn.
 */
async function hooklineDrain(ctx, sub, kind, endpoints, workers, options = {}) {
  const { total = ctx.scale.deliveries, fill = {}, env = {} } = options;
  await sub.call('reset');
  return withHookline(kind, { api: 'no-worker', env }, async (hl) => {
    const urls = Array.from({ length: endpoints }, (_, i) => sub.url(`/hook/${i}`));
    await stop(await fillBacklog(ctx, hl, urls, total / endpoints, fill));
    const watch = { groups: { queue: hl.pids }, db: dbOf(hl), limits: limitsOf(ctx) };
    return measureSteady(sub, total, watch, async () => {
      const start = now();
      await Promise.all(Array.from({ length: workers }, () => hl.worker()));
      return { start };
    });
  });
}

async function drainCase(ctx, kind, workers) {
  const metrics = {};
  const notes = {};
  await withSubscribers(['ok'], async (sub) => {
    // 1,000 endpoints of one tenant, past the default HOOKLINE_MAX_ENDPOINTS_PER_TENANT (100): a
    // claim then spans many ready endpoints, each with a backlog.
    for (const endpoints of [1, 10, 1000]) {
      ctx.log(`${kind} drain, ${fmt(endpoints)} endpoint(s), ${workers} worker(s)`);
      const env = endpoints > 100 ? { HOOKLINE_MAX_ENDPOINTS_PER_TENANT: String(endpoints) } : {};
      const r = await hooklineDrain(ctx, sub, kind, endpoints, workers, { env });
      Object.assign(metrics, steadyMetrics(`drain.${kind}.${endpoints}`, r));
      notes[`drain.${kind}.${endpoints}.rate`] = steadyNote(ctx, r);
    }
  });
  return { metrics, notes };
}

/**
 * The SQLite drain to 1 endpoint with tracing on at the default sampler (parent-based, always on):
 * OTEL_EXPORTER_OTLP_ENDPOINT points at a receiver in the bench that counts the spans it is sent over
 * the default protocol (http/protobuf). Its backlog's emits are traced too (the API process has the
 * same environment), so every attempt is a span in its emit's trace, as in production. Compare with
 * drain-sqlite's 1-endpoint row, which runs with tracing off.
 */
async function tracedDrainCase(ctx) {
  const otlp = await startOtlpCounter();
  try {
    return await withSubscribers(['ok'], async (sub) => {
      ctx.log('sqlite drain, 1 endpoint, 1 worker, tracing on');
      const env = { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: 'hookline-bench' };
      const r = await hooklineDrain(ctx, sub, 'sqlite', 1, 1, { env });
      // Counted when the drain is over and its processes stopped (killed: spans still batched in
      // them are not exported, so the count can fall short of every span made).
      const spans = `${fmt(otlp.spans)} spans received in ${fmt(otlp.exports)} exports (emits, fan-out and every attempt)`;
      return {
        metrics: steadyMetrics('drain.traced.sqlite.1', r),
        notes: { 'drain.traced.sqlite.1.rate': [steadyNote(ctx, r), spans].join('; ') },
      };
    });
  } finally {
    await otlp.close();
  }
}

/**
 * End to end: events emitted over HTTP (32 in flight) while hookline delivers, until the window's last
 * mark. Embedded (`serve`) on SQLite; on PostgreSQL one `serve --no-worker` and two `worker` processes.
 */
async function e2eCase(ctx, kind) {
  const metrics = {};
  const notes = {};
  const total = ctx.scale.deliveries;
  // --quick leaves out 10 endpoints here: it checks the harness within its two minutes.
  for (const endpoints of ctx.quick ? [1] : [1, 10]) {
    ctx.log(`${kind} end to end, ${endpoints} endpoint(s)`);
    const p = `e2e.${kind}.${endpoints}`;
    await withSubscribers(['ok'], (sub) =>
      withHookline(kind, { api: kind === 'sqlite' ? 'embedded' : 'no-worker' }, async (hl) => {
        const api = hl.api;
        const workers = kind === 'sqlite' ? [] : await Promise.all([hl.worker(), hl.worker()]);
        await Promise.all(workers.map((w) => w.ready()));
        const urls = Array.from({ length: endpoints }, (_, i) => sub.url(`/hook/${i}`));
        await createEndpoints(api.origin, hl.tenantKey, urls);
        const memory = watchMemory([api, ...workers]);
        // The emitter runs until the window's last mark, at most E2E_BACKLOG deliveries ahead of the
        // subscriber, so the window is a steady state of the whole path (lib/stats.js, boundBacklog).
        let emitter;
        const watch = {
          groups: { queue: hl.pids, emitter: () => [emitter.pid] },
          db: dbOf(hl),
          limits: limitsOf(ctx),
        };
        const r = await measureSteady(sub, total, watch, async () => {
          emitter = startEmitter({
            origin: api.origin,
            key: hl.producerKey,
            concurrency: 32,
            allowUpTo: Math.ceil(E2E_BACKLOG / endpoints),
          });
          const unbound = boundBacklog(sub, emitter.allow, endpoints);
          const finish = () =>
            unbound()
              .then(() => emitter.stop())
              .then(() => emitter.done);
          return { start: now(), finish };
        });
        const e = r.extra;
        const peaks = memory.stop();
        Object.assign(metrics, steadyMetrics(p, r), {
          [`${p}.ingest`]: e.rate,
          [`${p}.emitP50`]: e.p50,
          [`${p}.emitP99`]: e.p99,
          [`${p}.rss`]: Math.max(...peaks),
        });
        notes[`${p}.rate`] = steadyNote(ctx, r);
        if (e.failed) notes[`${p}.ingest`] = `${e.failed} emits failed: ${JSON.stringify(e.statuses)}`;
        if (workers.length)
          notes[`${p}.rss`] = `api ${fmt(peaks[0])} MB, workers ${peaks
            .slice(1)
            .map((m) => fmt(m))
            .join(' / ')} MB`;
      }),
    );
  }
  return { metrics, notes };
}

async function baselineCase(ctx, name, lib) {
  const total = ctx.scale.deliveries;
  const metrics = {};
  const notes = {};
  await withSubscribers(['ok'], async (sub) => {
    ctx.log(`${name} drain`);
    const d = await lib.drain({ subscriber: sub, total, limits: limitsOf(ctx) });
    Object.assign(metrics, steadyMetrics(`${name}.drain`, d));
    notes[`${name}.drain.rate`] = steadyNote(ctx, d);
    await sub.call('reset');
    ctx.log(`${name} end to end`);
    const e = await lib.endToEnd({ subscriber: sub, total, limits: limitsOf(ctx) });
    Object.assign(metrics, steadyMetrics(`${name}.e2e`, e), {
      [`${name}.ingest`]: e.extra.rate,
      [`${name}.emitP50`]: e.extra.p50,
      [`${name}.emitP99`]: e.extra.p99,
    });
    notes[`${name}.e2e.rate`] = steadyNote(ctx, e);
  });
  return { metrics, notes };
}

/** Ingest over HTTP, 32 in flight, no endpoint: closed-loop emitter for `ingestMs`, first 10 % left out. */
async function ingestRun(ctx, origin, key) {
  const e = await emit({ origin, key, durationMs: ctx.scale.ingestMs, concurrency: 32, warmup: 300 });
  return { rate: e.rate, p50: e.p50, p99: e.p99, note: e.failed ? `${e.failed} failed` : '' };
}

async function ingestCase(ctx) {
  const metrics = {};
  const notes = {};
  const record = (name, r) => {
    metrics[`ingest.${name}`] = r.rate;
    metrics[`ingest.${name}.p99`] = r.p99;
    if (r.note) notes[`ingest.${name}`] = r.note;
  };
  ctx.log('ingest: no-op Fastify');
  const noop = await startFastifyNoop({ port: await freePort() });
  try {
    record('fastify', await ingestRun(ctx, noop.origin, 'none'));
  } finally {
    noop.kill('SIGKILL');
  }
  for (const kind of ['sqlite', 'pg']) {
    ctx.log(`ingest: hookline ${kind}`);
    // Embedded `serve` on SQLite (its worker has nothing to deliver); the API process alone on PostgreSQL.
    await withHookline(kind, { api: kind === 'sqlite' ? 'embedded' : 'no-worker' }, async (hl) => {
      const api = hl.api;
      record(kind, await ingestRun(ctx, api.origin, hl.producerKey));
    });
  }
  return { metrics, notes };
}

/** Emit latency while delivering: embedded SQLite, 1 endpoint, emits paced at half the ingest rate. */
async function ingestHalfCase(ctx) {
  let ingest = ctx.results['ingest.sqlite'];
  const notes = {};
  if (!Number.isFinite(ingest)) {
    ctx.log('emit p99 at half ingest: measuring SQLite ingest first');
    ingest = await withHookline('sqlite', { api: 'embedded' }, async (hl) => {
      return (await ingestRun(ctx, hl.api.origin, hl.producerKey)).rate;
    });
  }
  const rate = Math.max(1, Math.round(ingest / 2));
  const warmupMs = ctx.scale.halfWarmupMs;
  const paced = (origin, key) =>
    emit({
      origin,
      key,
      rate,
      durationMs: warmupMs + ctx.scale.pacedMs,
      warmup: Math.round((rate * warmupMs) / 1000),
      graceMs: ctx.scale.graceMs,
    });
  // The same emitter at the same rate against the no-op route: the floor that the emitter, the
  // loopback and the two cores put under any server's p99 (bench/HISTORY.md, "Session of run Y").
  ctx.log(`emit latency at ${fmt(rate)}/s against the no-op route`);
  const noop = await startFastifyNoop({ port: await freePort() });
  let floor;
  try {
    floor = await paced(noop.origin, 'none');
  } finally {
    noop.kill('SIGKILL');
  }
  ctx.log(`emit latency at ${fmt(rate)}/s (half of ingest ${fmt(ingest)}/s) while delivering`);
  return withSubscribers(['ok'], (sub) =>
    withHookline('sqlite', { api: 'embedded' }, async (hl) => {
      const api = hl.api;
      await createEndpoints(api.origin, hl.tenantKey, [sub.url('/hook/0')]);
      // The first seconds at this rate are a start-up: a fresh process, its code still cold, serves a
      // fraction of the rate for ~0.5 s and then works off the emits that queued meanwhile, for up to
      // ~3.5 s (bench/HISTORY.md, "Session of run T"). They are left out of the figure, which is
      // about delivering while emitting, and their p99 goes in the note.
      const e = await paced(api.origin, hl.producerKey);
      const delivered = (await sub.call('stats')).count;
      notes['half.p99'] = [
        `${fmt(rate)} emits/s for ${fmt(ctx.scale.pacedMs / 1000)} s after ${fmt(warmupMs / 1000)} s of start-up (p99 with it: ${fmt(e.all.p99, 1)} ms); ${fmt(delivered)} of ${fmt(e.ok)} delivered by the last answer`,
        e.unanswered
          ? `${fmt(e.unanswered)} unanswered after ${fmt(ctx.scale.graceMs / 1000)} s (p99 is a lower bound)`
          : '',
      ]
        .filter(Boolean)
        .join('; ');
      notes['half.noop.p99'] = `${fmt(rate)} emits/s, the same emitter and start-up left out`;
      return {
        metrics: { 'half.p50': e.p50, 'half.p99': e.p99, 'half.rate': rate, 'half.noop.p99': floor.p99 },
        notes,
      };
    }),
  );
}

/**
 * Backlog independence: SQLite, one endpoint, drain rate with a large backlog and with 1,000 queued.
 * The backlog is fanned out by a running worker while the endpoint is held at `rate_limit` 1, so it
 * is queued deliveries, not messages still to fan out (the worker delivers while it fans out); the
 * limit is then lifted and the rate taken between the 100th and the 900th delivery after that.
 *
 * The worker first delivers `backlogWarmup` events at full speed. Without that, both windows caught a
 * worker whose hot code had only ever run once a second: the rate after the 900th delivery was about
 * twice that of the window, and the ratio spread 0.67-1.31 over three runs of the same build
 * (bench/HISTORY.md, "Session of run N"). Warm, the ratio compares the backlogs, as it should.
 */
async function backlogCase(ctx) {
  const metrics = {};
  const notes = {};
  let idleMs;
  for (const [name, events] of [
    ['large', ctx.scale.backlog],
    ['small', 1000],
  ]) {
    ctx.log(`backlog independence: ${fmt(events)} queued`);
    await withSubscribers(['ok'], (sub) =>
      withHookline('sqlite', { api: 'no-worker' }, async (hl) => {
        const worker = await hl.worker();
        const [endpoint] = await createEndpoints(hl.api.origin, hl.tenantKey, [sub.url('/hook/0')], 1);
        const setRateLimit = async (rateLimit) => {
          const res = await fetch(`${hl.api.origin}/v1/webhooks/${endpoint}`, {
            method: 'PATCH',
            headers: { authorization: `Bearer ${hl.tenantKey}`, 'content-type': 'application/json' },
            body: JSON.stringify({ rate_limit: rateLimit }),
          });
          if (res.status !== 200) throw new Error(`PATCH rate_limit answered ${res.status}`);
        };
        const warmup = ctx.scale.backlogWarmup;
        await emitBacklog(ctx, hl, warmup);
        const warm = await awaitDeliveries(sub, warmup, now(), limitsOf(ctx));
        if (!warm.done) throw new Error('backlog: the warm-up was not delivered');
        const warmAt = now();
        await setRateLimit(1);
        await emitBacklog(ctx, hl, events);
        const filled = now();
        while ((await queueDepth(worker.origin))?.awaiting_fanout !== 0) {
          if (now() - filled > ctx.scale.stallMs) throw new Error('backlog: fan-out did not finish');
          await sleep(100);
        }
        // Both releases come as long after the warm-up: the 1,000 wait as long as the large backlog's
        // fill took, since an idle worker is slower to start again whatever its backlog.
        idleMs ??= now() - warmAt;
        await sleep(warmAt + idleMs - now());
        const before = (await sub.call('stats')).count;
        await setRateLimit(null);
        const start = now();
        const r = await awaitDeliveries(sub, before + 900, start, limitsOf(ctx));
        const t100 = await sub.call('timeOf', { k: before + 100 });
        metrics[`backlog.${name}`] = r.done ? (800 / (r.at - t100)) * 1000 : NaN;
        notes[`backlog.${name}`] = [
          shortfall(ctx, r, before + 900),
          `released ${fmt((start - warmAt) / 1000, 1)} s after ${fmt(warmup)} warm-up deliveries`,
        ]
          .filter(Boolean)
          .join('; ');
      }),
    );
  }
  metrics['backlog.events'] = ctx.scale.backlog;
  return { metrics, notes };
}

/**
 * Isolation: SQLite drain to 10 endpoints, nine on the healthy subscriber and the tenth on a second
 * one that either hangs or is healthy too; steady rate of the nine's deliveries.
 */
async function isolationCase(ctx) {
  const metrics = {};
  const notes = {};
  const events = Math.round(ctx.scale.sideDeliveries / 10);
  for (const tenth of ['ok', 'hang']) {
    ctx.log(`isolation: tenth endpoint ${tenth === 'ok' ? 'healthy' : 'hanging'}`);
    await withSubscribers(['ok', tenth], (sub, other) =>
      withHookline(
        'sqlite',
        { env: { HOOKLINE_DELIVERY_TIMEOUT_MS: '2000' }, api: 'no-worker' },
        async (hl) => {
          const urls = [...Array.from({ length: 9 }, (_, i) => sub.url(`/hook/${i}`)), other.url('/hook/9')];
          await stop(await fillBacklog(ctx, hl, urls, events));
          const watch = { groups: { queue: hl.pids }, limits: limitsOf(ctx) };
          const r = await measureSteady(sub, 9 * events, watch, async () => {
            const start = now();
            await hl.worker();
            return { start };
          });
          metrics[`isolation.${tenth}`] = r.rate;
          notes[`isolation.${tenth}`] = steadyNote(ctx, r);
        },
      ),
    );
  }
  return { metrics, notes };
}

/** Fan-out independence: emit latency of embedded `serve` (SQLite) at 50/s with 1,000 endpoints vs 1. */
async function fanoutCase(ctx) {
  const metrics = {};
  const notes = {};
  // One tenant with 1,000 endpoints: past the default HOOKLINE_MAX_ENDPOINTS_PER_TENANT (100).
  const env = { HOOKLINE_MAX_ENDPOINTS_PER_TENANT: '1000' };
  for (const endpoints of [1, 1000]) {
    ctx.log(`fan-out: 50 emits/s with ${fmt(endpoints)} endpoint(s)`);
    await withSubscribers(['ok'], (sub) =>
      withHookline('sqlite', { api: 'embedded', env }, async (hl) => {
        const api = hl.api;
        const urls = Array.from({ length: endpoints }, (_, i) => sub.url(`/hook/${i}`));
        await createEndpoints(api.origin, hl.tenantKey, urls);
        const e = await emit({
          origin: api.origin,
          key: hl.producerKey,
          rate: 50,
          durationMs: ctx.scale.fanoutMs,
          warmup: 10,
          graceMs: ctx.scale.graceMs,
        });
        const delivered = (await sub.call('stats')).count;
        metrics[`fanout.${endpoints}.p50`] = e.p50;
        metrics[`fanout.${endpoints}.p99`] = e.p99;
        notes[`fanout.${endpoints}.p99`] = [
          `${fmt(e.n)} emits; ${fmt(delivered)} deliveries meanwhile`,
          e.unanswered
            ? `${fmt(e.unanswered)} unanswered ${fmt(ctx.scale.graceMs / 1000)} s after the last emit (p99 is a lower bound)`
            : '',
        ]
          .filter(Boolean)
          .join('; ');
      }),
    );
  }
  return { metrics, notes };
}

/**
 * Memory: `memoryEvents` events × 10 endpoints emitted through `serve --no-worker` while the
 * subscriber is down; one `hookline worker` fans out what the emits left and keeps failing; its peak
 * RSS is taken once fan-out is complete and it has run a while longer. Then the subscriber comes up and
 * the drain is timed.
 */
async function memoryCase(ctx) {
  const events = ctx.scale.memoryEvents;
  const total = events * 10;
  const env = { HOOKLINE_RETRY_BASE_MS: '200', HOOKLINE_RETRY_MAX_MS: '1000', HOOKLINE_MAX_RETRIES: '100' };
  const notes = {};
  return withSubscribers(['down'], (sub) =>
    withHookline('sqlite', { env, api: 'no-worker' }, async (hl) => {
      const urls = Array.from({ length: 10 }, (_, i) => sub.url(`/hook/${i}`));
      const api = await fillBacklog(ctx, hl, urls, events, { concurrency: 96 });
      const worker = await hl.worker();
      const memory = watchMemory([worker], 500);
      // Fan-out is complete when no message awaits it (hookline_queue_depth on the API's /metrics).
      const t0 = now();
      let depth = null;
      while (now() - t0 < Math.max(30_000, ctx.scale.memoryBudgetMs)) {
        await sleep(1000);
        depth = await queueDepth(api.origin);
        ctx.progress(`fan-out: ${depth ? JSON.stringify(depth) : 'queue depth not in /metrics'}`);
        if (!depth || depth.awaiting_fanout === 0) break;
      }
      const pending = depth ? (depth.due ?? 0) + (depth.scheduled ?? 0) + (depth.delivering ?? 0) : NaN;
      if (!depth) notes['memory.rss'] = 'queue depth unknown (/metrics without hookline_queue_depth)';
      else if (depth.awaiting_fanout > 0)
        notes['memory.rss'] = `fan-out incomplete after ${fmt((now() - t0) / 1000)} s`;
      await sleep(ctx.quick ? 2000 : 10_000); // the worker keeps retrying with everything pending
      const [rss] = memory.stop();
      notes['memory.rss'] ??= `${fmt(pending)} pending per /metrics when measured`;
      await stop(api);
      ctx.log(`subscriber up; draining ${fmt(total)}`);
      const start = now();
      await sub.call('up');
      const r = await awaitDeliveries(sub, total, start, {
        stallMs: ctx.scale.stallMs,
        budgetMs: ctx.scale.memoryBudgetMs,
      });
      notes['memory.drain'] = [
        r.first ? `first delivery ${fmt((r.first - start) / 1000, 1)} s after up` : 'no delivery',
        shortfall(ctx, r, total),
      ]
        .filter(Boolean)
        .join('; ');
      return {
        metrics: {
          'memory.rss': rss,
          'memory.pending': pending,
          'memory.total': total,
          'memory.drain': r.done ? (r.at - start) / 1000 : NaN,
          'memory.rate': r.rate,
        },
        notes,
      };
    }),
  );
}

/**
 * Ordered delivery (docs/delivery.md): steady rate of a SQLite drain to one endpoint of the same
 * backlog unkeyed and spread over 1,000 ordering keys; and with a single key, which allows one
 * delivery per round trip, beside serial POSTs (one connection, no queue): the physical bound.
 */
async function orderingCase(ctx) {
  const metrics = {};
  const notes = {};
  const total = ctx.scale.sideDeliveries;
  const oneKey = ctx.scale.oneKeyDeliveries;
  await withSubscribers(['ok'], async (sub) => {
    for (const [name, keys, events] of [
      ['unkeyed', 0, total],
      ['keys1000', 1000, total],
      ['key1', 1, oneKey],
    ]) {
      ctx.log(`ordering: ${fmt(events)} deliveries, ${keys ? `${fmt(keys)} key(s)` : 'unkeyed'}`);
      const fill = { orderingKeys: keys };
      const r = await hooklineDrain(ctx, sub, 'sqlite', 1, 1, { total: events, fill });
      metrics[`ordering.${name}`] = r.rate;
      notes[`ordering.${name}`] = steadyNote(ctx, r);
    }
    const r = await ceiling({ url: sub.url('/hook/0'), total: oneKey, warmup: 200, connections: 1 });
    metrics['ordering.serial'] = r.rate;
  });
  return { metrics, notes };
}

/**
 * Keyed lag under a flaky subscriber (issue 36): 150 events/s for `keyedMs`, 70 % of them keyed over
 * 50 keys, fanned out to 3 endpoints at one subscriber that answers 500 to 10 % of requests at random
 * (quickly: it is not overloaded). Embedded `serve` on SQLite; 1 `serve --no-worker` and 2 workers on
 * PostgreSQL. Retries start at 1 s (HOOKLINE_RETRY_BASE_MS) so a failed head costs a second, not ten.
 * Figures, from the emitter's answer times and the subscriber's arrival times (one machine, one clock):
 *   lag       a keyed event's acknowledged emit → its first 2xx, per endpoint; `clean` leaves out the
 *             events that failed an attempt or waited (directly or down the line) behind one that did:
 *             what a head that succeeds costs the events behind it
 *   handoff   the first 2xx of one event of a key → the first attempt of the key's next at the same
 *             endpoint, for a next already acknowledged by then (it was waiting)
 *   early     a key's next attempted before the one before it had succeeded (must be 0), and `order`
 *             the pairs whose first successes came the other way round (must be 0)
 *   limit     each endpoint's adaptive limit (GET /v1/admin/tenants/:id/endpoints every 500 ms while
 *             emitting), mean over the samples, as a share of the ceiling
 */
async function keyedLagCase(ctx, kind) {
  const p = `keyed.${kind}`;
  const durationMs = ctx.scale.keyedMs;
  const env = { HOOKLINE_RETRY_BASE_MS: '1000', HOOKLINE_RETRY_MAX_MS: '10000' };
  ctx.log(
    `keyed lag, ${kind}: 150 events/s for ${fmt(durationMs / 1000)} s, 70 % keyed, 3 endpoints, 10 % 500s`,
  );
  return withSubscribers(['flaky'], (sub) =>
    withHookline(kind, { env, api: kind === 'sqlite' ? 'embedded' : 'no-worker' }, async (hl) => {
      const api = hl.api;
      const workers = kind === 'sqlite' ? [] : await Promise.all([hl.worker(), hl.worker()]);
      await Promise.all(workers.map((w) => w.ready()));
      const endpoints = 3;
      await createEndpoints(
        api.origin,
        hl.tenantKey,
        Array.from({ length: endpoints }, (_, i) => sub.url(`/hook/${i}`)),
      );
      const adminKey = await hl.createKey('instance_manager');
      const limits = [];
      let sampling = true;
      const sampler = (async () => {
        while (sampling) {
          try {
            const res = await fetch(`${api.origin}/v1/admin/tenants/acme/endpoints`, {
              headers: { authorization: `Bearer ${adminKey}` },
            });
            for (const e of (await res.json()).data)
              limits.push(e.delivery.concurrency_limit / e.delivery.concurrency_ceiling);
          } catch {
            // a missed sample
          }
          await sleep(500);
        }
      })();
      const start = now();
      const e = await emit({
        origin: api.origin,
        key: hl.producerKey,
        rate: 150,
        durationMs,
        orderingKeys: 50,
        keyedShare: 0.7,
        recordAcks: true,
        graceMs: ctx.scale.graceMs,
      });
      sampling = false;
      await sampler;
      const total = e.ok * endpoints;
      const r = await awaitDeliveries(sub, total, start, {
        ...limitsOf(ctx),
        budgetMs: durationMs + 120_000,
      });
      const figures = keyedFigures(e.acks, await sub.call('keyed'));
      const mean = limits.reduce((a, b) => a + b, 0) / limits.length;
      return {
        metrics: {
          [`${p}.lagP50`]: figures.lag.p50,
          [`${p}.lagP99`]: figures.lag.p99,
          [`${p}.lagMax`]: figures.lag.max,
          [`${p}.cleanP50`]: figures.clean.p50,
          [`${p}.cleanP99`]: figures.clean.p99,
          [`${p}.cleanMax`]: figures.clean.max,
          [`${p}.handoffP50`]: figures.handoff.p50,
          [`${p}.handoffP99`]: figures.handoff.p99,
          [`${p}.early`]: figures.early,
          [`${p}.order`]: figures.order,
          [`${p}.limit`]: mean * 100,
        },
        notes: {
          [`${p}.lagP50`]: [
            `${fmt(figures.lag.n)} keyed deliveries of ${fmt(e.ok)} events (${fmt(e.rate)} emits/s)`,
            shortfall(ctx, r, total),
          ]
            .filter(Boolean)
            .join('; '),
          [`${p}.cleanP50`]: `${fmt(figures.clean.n)} not behind a failed attempt`,
          [`${p}.handoffP50`]: `${fmt(figures.handoff.n)} handoffs`,
          [`${p}.limit`]: `${fmt(limits.length)} samples of ${endpoints} endpoints`,
        },
      };
    }),
  );
}

/**
 * Keyed lag, handoffs and order from the emitter's `acks` ([seq, answered at]) and the subscriber's
 * keyed records ([path, seq, key, first attempt, first 2xx]); see keyedLagCase.
 */
function keyedFigures(acks, records) {
  const ackOf = new Map(acks);
  const lines = new Map();
  for (const [path, seq, key, attempt, ok] of records) {
    if (!ackOf.has(seq)) continue;
    const line = `${path} ${key}`;
    if (!lines.has(line)) lines.set(line, []);
    lines.get(line).push({ seq, attempt, ok, ack: ackOf.get(seq) });
  }
  const lag = [];
  const clean = [];
  const handoff = [];
  let early = 0;
  let order = 0;
  for (const line of lines.values()) {
    // A line's events in the order their emits were acknowledged.
    line.sort((a, b) => a.ack - b.ack);
    let behindFailure = false;
    for (const [i, ev] of line.entries()) {
      if (ev.ok === null) continue;
      const prev = line[i - 1];
      // Waiting: acknowledged before the one before it had succeeded.
      const waited = prev !== undefined && prev.ok !== null && ev.ack < prev.ok;
      const failedHere = ev.ok > ev.attempt;
      behindFailure = failedHere || (waited && behindFailure);
      lag.push(ev.ok - ev.ack);
      if (!behindFailure) clean.push(ev.ok - ev.ack);
      if (prev === undefined || prev.ok === null) continue;
      if (ev.attempt < prev.ok) early++;
      if (ev.ok < prev.ok) order++;
      if (waited) handoff.push(ev.attempt - prev.ok);
    }
  }
  return { lag: summarize(lag), clean: summarize(clean), handoff: summarize(handoff), early, order };
}

/**
 * Rate limits: PostgreSQL, two workers, one endpoint with rate_limit 100 and a backlog larger than
 * the measured window; the rate the subscriber sees between its 100th delivery and the last.
 */
async function rateLimitCase(ctx) {
  const events = ctx.scale.rateLimitDeliveries;
  ctx.log(`rate limit 100/s: ${fmt(events)} deliveries, 2 PostgreSQL workers`);
  return withSubscribers(['ok'], (sub) =>
    withHookline('pg', { api: 'no-worker' }, async (hl) => {
      await stop(await fillBacklog(ctx, hl, [sub.url('/hook/0')], events, { endpoint: { rate_limit: 100 } }));
      const start = now();
      await Promise.all([hl.worker(), hl.worker()]);
      // Paced: the budget is the backlog's time at the limit, with room to spare.
      const r = await awaitDeliveries(sub, events, start, {
        ...limitsOf(ctx),
        budgetMs: events * 20 + 30_000,
      });
      const t100 = await sub.call('timeOf', { k: 100 });
      const window = (r.at - t100) / 1000;
      return {
        metrics: { 'rate.limit100': r.done ? (events - 100) / window : NaN, 'rate.target': 100 },
        notes: { 'rate.limit100': r.done ? `over ${fmt(window, 1)} s` : shortfall(ctx, r, events) },
      };
    }),
  );
}

/**
 * Emitting inside the product's own transaction (docs/producers.md) beside HTTP emits, on one
 * PostgreSQL installation (its tables in a fresh schema; 1 API process, 2 workers, 1 endpoint at the
 * subscriber). First the product process: 8 connections, each a closed loop of BEGIN; INSERT a user
 * into the product's own table (in a schema of its own); emitWithin user.created; COMMIT. Then,
 * once those have been delivered, the HTTP emitter (32 POST /v1/events in flight) sends as many.
 * Each leaves out its first 20 % as warm-up.
 */
async function producerCase(ctx) {
  const total = ctx.scale.producerTransactions;
  const warmup = Math.floor(total * 0.2);
  const metrics = {};
  const notes = {};
  // The producer seals payloads with the installation's key: the case chooses it.
  const encryptionKey = randomBytes(32).toString('base64');
  await withSubscribers(['ok'], (sub) =>
    withHookline('pg', { api: 'no-worker', env: { HOOKLINE_ENCRYPTION_KEY: encryptionKey } }, async (hl) => {
      const workers = await Promise.all([hl.worker(), hl.worker()]);
      await Promise.all(workers.map((w) => w.ready()));
      await createEndpoints(hl.api.origin, hl.tenantKey, [sub.url('/hook/0')]);
      const delivered = async (n, start) => {
        const r = await awaitDeliveries(sub, n, start, limitsOf(ctx));
        return r.done ? '' : shortfall(ctx, r, n);
      };

      ctx.log(`producer: ${fmt(total)} sign-ups through emitWithin, 8 connections`);
      const product = await createSchema('bench_product');
      try {
        const start = now();
        const p = await produce(
          {
            connectionString: pgUrlWith({ application_name: product.schema }),
            productSchema: product.schema,
            schema: hl.app,
            encryptionKey,
            connections: 8,
            total,
            warmup,
          },
          { onProgress: (m) => ctx.progress(`committed ${fmt(m.committed)}/${fmt(total)}`) },
        );
        Object.assign(metrics, {
          'producer.rate': p.rate,
          'producer.emitP50': p.emitP50,
          'producer.emitP99': p.emitP99,
          'producer.txP50': p.txP50,
          'producer.txP99': p.txP99,
        });
        notes['producer.rate'] = [
          `${fmt(p.counted)} transactions after ${fmt(warmup)} of warm-up`,
          await delivered(total, start),
        ]
          .filter(Boolean)
          .join('; ');
        notes['producer.txP50'] =
          `of which COMMIT p50 ${fmt(p.commitP50, 1)} / p99 ${fmt(p.commitP99, 1)} ms`;
      } finally {
        await product.drop();
      }

      ctx.log(`producer: ${fmt(total)} HTTP emits, 32 in flight`);
      await sub.call('reset');
      const start = now();
      const e = await emit(
        { origin: hl.api.origin, key: hl.producerKey, total, concurrency: 32, warmup },
        { onProgress: (m) => ctx.progress(`emitted ${fmt(m.ok)}/${fmt(total)}`) },
      );
      Object.assign(metrics, {
        'producer.http.rate': e.rate,
        'producer.http.p50': e.p50,
        'producer.http.p99': e.p99,
      });
      notes['producer.http.rate'] = [e.failed ? `${e.failed} emits failed` : '', await delivered(e.ok, start)]
        .filter(Boolean)
        .join('; ');
    }),
  );
  return { metrics, notes };
}

/** Every case, in the order they run; `--only` selects by name or name prefix. */
export const CASES = [
  {
    name: 'ceiling',
    about: 'undici Pool straight at the subscriber, no queue (steady)',
    run: async (ctx) => {
      const total = ctx.scale.deliveries;
      return withSubscribers(['ok'], async (sub) => {
        ctx.log('ceiling: raw undici Pool → subscriber');
        let run;
        const watch = { groups: { queue: () => [run.pid] }, limits: limitsOf(ctx) };
        const r = await measureSteady(sub, total, watch, async () => {
          run = startCeiling({ url: sub.url('/hook/0'), total });
          return { start: now() };
        });
        const { failed } = await run.done;
        const note = [steadyNote(ctx, r), failed ? `${failed} failed` : ''].filter(Boolean).join('; ');
        return { metrics: steadyMetrics('ceiling', r), notes: { 'ceiling.rate': note } };
      });
    },
  },
  {
    name: 'bullmq',
    about: 'BullMQ on Redis: drain and end to end (steady)',
    run: (ctx) => baselineCase(ctx, 'bullmq', bullmq),
  },
  {
    name: 'graphile',
    about: 'graphile-worker on PostgreSQL: drain and end to end (steady)',
    run: (ctx) => baselineCase(ctx, 'graphile', graphile),
  },
  {
    name: 'drain-sqlite',
    about: 'hookline SQLite drain, 1 worker, 1, 10 and 1,000 endpoints (steady)',
    run: (ctx) => drainCase(ctx, 'sqlite', 1),
  },
  {
    name: 'traced-drain',
    about: 'hookline SQLite drain, 1 worker, 1 endpoint, tracing on at the default sampler (steady)',
    run: tracedDrainCase,
  },
  {
    name: 'drain-pg',
    about: 'hookline PostgreSQL drain, 2 workers, 1, 10 and 1,000 endpoints (steady)',
    run: (ctx) => drainCase(ctx, 'pg', 2),
  },
  {
    name: 'e2e-sqlite',
    about: 'hookline SQLite end to end, serve + emitter (steady)',
    run: (ctx) => e2eCase(ctx, 'sqlite'),
  },
  {
    name: 'e2e-pg',
    about: 'hookline PostgreSQL end to end, 1 API + 2 workers + emitter (steady)',
    run: (ctx) => e2eCase(ctx, 'pg'),
  },
  { name: 'ingest', about: 'POST /v1/events rate: no-op Fastify, SQLite, PostgreSQL', run: ingestCase },
  { name: 'ingest-half', about: 'emit p99 while delivering at half the ingest rate', run: ingestHalfCase },
  { name: 'backlog', about: 'drain rate with a large backlog vs 1,000 queued', run: backlogCase },
  { name: 'isolation', about: '9 healthy endpoints beside 1 hanging', run: isolationCase },
  { name: 'fanout', about: 'emit p99 with 1,000 endpoints vs 1', run: fanoutCase },
  { name: 'memory', about: 'worker RSS with a large pending backlog, then its drain', run: memoryCase },
  { name: 'ordering', about: 'drain with 0, 1,000 and 1 ordering keys', run: orderingCase },
  {
    name: 'keyed-lag-sqlite',
    about: 'keyed lag under a flaky subscriber (10 % 500s), 70 % keyed over 50 keys, 3 endpoints, SQLite',
    run: (ctx) => keyedLagCase(ctx, 'sqlite'),
  },
  {
    name: 'keyed-lag-pg',
    about: 'keyed lag under a flaky subscriber, PostgreSQL (1 API + 2 workers)',
    run: (ctx) => keyedLagCase(ctx, 'pg'),
  },
  { name: 'rate-limit', about: 'rate_limit 100 across 2 PostgreSQL workers', run: rateLimitCase },
  {
    name: 'producer',
    about: 'emitWithin from 8 product connections beside HTTP emits (PostgreSQL)',
    run: producerCase,
  },
];
