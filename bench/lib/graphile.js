// graphile-worker baseline on the same PostgreSQL, in a schema of its own per run: one job per
// delivery, max_attempts 17 (its built-in exponential backoff), a producer process (addJobs in
// chunks to fill a backlog, addJob with 32 in flight while delivering) and a worker process running
// 64 jobs at once on a pool of 10 connections, with the batching its performance guide recommends
// for many short jobs (local queue, batched completion). Each job signs and POSTs like hookline.
import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import { Pool } from 'undici';
import { PG_URL, createSchema } from './hookline.js';
import { childOptions, forkRole, isMain, serveRequests } from './processes.js';
import { deliveryBody, eventData, newSecret, signedHeaders } from './payload.js';
import { now, streamAdds } from './stats.js';
import { awaitDeliveries } from './subscriber.js';

const CONCURRENCY = 64;
const MAX_ATTEMPTS = 17;
// Errors only, on stderr (the orchestrator shows the tail if the process dies).
const logger = new Logger(() => (level, message) => {
  if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`);
});

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
    return await fn({ producer, startWorker });
  } finally {
    for (const w of workers) w.kill('SIGKILL');
    producer.kill('SIGKILL');
    await Promise.all([producer, ...workers].map((c) => c.exited));
    await drop();
  }
}

/** Drain: `total` jobs queued first, then the worker process starts; rate from its spawn to the last delivery. */
export function drain({ subscriber, total, limits }) {
  return withSchema(async ({ producer, startWorker }) => {
    await producer.call('fill', { url: subscriber.url('/hook/0'), total });
    const start = now();
    startWorker();
    return awaitDeliveries(subscriber, total, start, limits);
  });
}

/** End to end: worker running, then `total` jobs added with 32 in flight while it delivers. */
export function endToEnd({ subscriber, total, limits }) {
  return withSchema(async ({ producer, startWorker }) => {
    await startWorker().waitEvent((m) => m.event === 'ready');
    const start = now();
    const adds = await producer.call('stream', { url: subscriber.url('/hook/0'), total, concurrency: 32 });
    const r = await awaitDeliveries(subscriber, total, start, limits);
    return { ...r, ingest: adds.rate, emit: adds, latency: await subscriber.call('latency') };
  });
}

async function producerMain(schema) {
  // One connection per add in flight (32), so adds do not queue for the pool.
  const utils = await makeWorkerUtils({ connectionString: PG_URL, schema, logger, maxPoolSize: 34 });
  await utils.migrate();
  serveRequests({
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
    stream: ({ url, total, concurrency }) =>
      streamAdds(total, concurrency, (i, t0) =>
        utils.addJob('deliver', { url, data: eventData(i, t0) }, { maxAttempts: MAX_ATTEMPTS }),
      ),
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
    connectionString: PG_URL,
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
