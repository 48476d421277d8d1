// graphile-worker baseline on the same PostgreSQL, in a schema of its own per run: one job per
// delivery, max_attempts 17 (its built-in exponential backoff), a producer process (addJobs in
// chunks to fill a backlog, addJob with 32 in flight while delivering) and a worker process running
// 64 jobs at once on a pool of 10 connections, with the batching its performance guide recommends
// for many short jobs (local queue, batched completion). Each job signs and POSTs like hookline.
import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import { Pool } from 'undici';
import { createSchema, pgUrlWith } from './hookline.js';
import { childOptions, forkRole, isMain, serveRequests } from './processes.js';
import { deliveryBody, eventData, newSecret, signedHeaders } from './payload.js';
import { now, streamAdds, streamBounded } from './stats.js';
import { measureSteady } from './window.js';

const CONCURRENCY = 64;
const MAX_ATTEMPTS = 17;
// Errors only, on stderr (the orchestrator shows the tail if the process dies).
const logger = new Logger(() => (level, message) => {
  if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`);
});

/** The connection URL of a run: tagged with its schema as application_name (lib/window.js). */
const connectionString = (schema) => pgUrlWith({ application_name: schema });

async function withSchema(fn) {
  const { schema, drop } = await createSchema('gw_bench');
  const producer = forkRole(import.meta.url, { role: 'producer', schema });
  await producer.waitEvent((m) => m.event === 'ready');
  const workers = [];
  const startWorker = () => {
    const w = forkRole(import.meta.url, { role: 'worker', schema });
    workers.push(w);
    return w;
  };
  try {
    return await fn({ producer, startWorker, workers, schema });
  } finally {
    for (const w of workers) w.kill('SIGKILL');
    producer.kill('SIGKILL');
    await Promise.all([producer, ...workers].map((c) => c.exited));
    await drop();
  }
}

/**
 * Drain: `total` jobs queued first, then the worker process starts; steady window of the deliveries
 * (lib/window.js) with the worker's CPU and that of the backends serving its connections.
 */
export function drain({ subscriber, total, limits }) {
  return withSchema(async ({ producer, startWorker, workers, schema }) => {
    await producer.call('fill', { url: subscriber.url('/hook/0'), total });
    const groups = { queue: () => workers.map((w) => w.pid) };
    return measureSteady(subscriber, total, { groups, db: { kind: 'pg', app: schema }, limits }, async () => {
      const start = now();
      startWorker();
      return { start };
    });
  });
}

/**
 * End to end: worker running, then jobs added with 32 in flight while it delivers, until the window's
 * last mark. The producer's CPU counts with the worker's: it does the inserts hookline's API does.
 */
export function endToEnd({ subscriber, total, limits }) {
  return withSchema(async ({ producer, startWorker, schema }) => {
    const worker = startWorker();
    await worker.waitEvent((m) => m.event === 'ready');
    const groups = { queue: () => [worker.pid, producer.pid] };
    return measureSteady(subscriber, total, { groups, db: { kind: 'pg', app: schema }, limits }, async () => {
      return streamBounded(subscriber, producer, 100 * total);
    });
  });
}

async function producerMain(schema) {
  // One connection per add in flight (32), so adds do not queue for the pool.
  const utils = await makeWorkerUtils({
    connectionString: connectionString(schema),
    schema,
    logger,
    maxPoolSize: 34,
  });
  await utils.migrate();
  let stopped = false;
  let allowed = Infinity;
  serveRequests({
    stop: () => {
      stopped = true;
    },
    allow: ({ upTo }) => {
      allowed = upTo;
    },
    async fill({ url, total, chunk = 1000 }) {
      for (let i = 0; i < total; i += chunk) {
        const jobs = [];
        for (let j = i; j < Math.min(total, i + chunk); j++)
          jobs.push({
            identifier: 'deliver',
            payload: { url, data: eventData(j) },
            maxAttempts: MAX_ATTEMPTS,
          });
        await utils.addJobs(jobs);
      }
      return { total };
    },
    stream: ({ url, total, concurrency, allowUpTo = Infinity }) => {
      allowed = allowUpTo;
      return streamAdds(
        total,
        concurrency,
        (i, t0) => utils.addJob('deliver', { url, data: eventData(i, t0) }, { maxAttempts: MAX_ATTEMPTS }),
        () => stopped,
        () => allowed,
      );
    },
  });
  process.send({ event: 'ready' });
}

async function workerMain(schema) {
  const secret = newSecret();
  const pools = new Map();
  const pool = (origin) => {
    if (!pools.has(origin)) pools.set(origin, new Pool(origin, { connections: CONCURRENCY, pipelining: 1 }));
    return pools.get(origin);
  };
  const deliver = async (payload, helpers) => {
    const target = new URL(payload.url);
    const body = deliveryBody(payload.data);
    const res = await pool(target.origin).request({
      path: target.pathname,
      method: 'POST',
      headers: signedHeaders(secret, `msg_${helpers.job.id}`, body),
      body,
      headersTimeout: 15_000,
      bodyTimeout: 15_000,
    });
    await res.body.dump();
    if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`HTTP ${res.statusCode}`);
  };
  serveRequests({});
  await run({
    connectionString: connectionString(schema),
    schema,
    concurrency: CONCURRENCY,
    maxPoolSize: 10,
    pollInterval: 1000,
    noHandleSignals: true,
    logger,
    taskList: { deliver },
    preset: {
      worker: { localQueue: { size: 2 * CONCURRENCY }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
    },
  });
  process.send({ event: 'ready' });
}

if (isMain(import.meta.url)) {
  const { role, schema } = childOptions();
  (role === 'producer' ? producerMain : workerMain)(schema).catch((err) => {
    process.stderr.write(`${err.stack}\n`);
    process.exit(1);
  });
}
