// BullMQ baseline on the local Redis, set up the way a competent engineer would deliver webhooks
// with it: one job per delivery; a producer process (addBulk in chunks to fill a backlog, or add()
// with 32 in flight while delivering); a worker process with concurrency 64 posting through an undici
// Pool, signing each attempt; retries with BullMQ's exponential backoff (17 attempts); completed
// jobs removed. Each run uses a fresh queue name and obliterates the queue afterwards.
import { randomBytes } from 'node:crypto';
import { importBenchDep } from './bench-deps.js';
import { Pool } from 'undici';
import { childOptions, forkRole, isMain, serveRequests } from './processes.js';
import { deliveryBody, eventData, newSecret, signedHeaders } from './payload.js';
import { now, streamAdds, streamBounded } from './stats.js';
import { measureSteady } from './window.js';

const { Queue, Worker } = await importBenchDep('bullmq');

const connection = {
  host: process.env.BENCH_REDIS_HOST ?? '127.0.0.1',
  port: Number(process.env.BENCH_REDIS_PORT ?? 6379),
};
const jobOptions = {
  attempts: 17,
  backoff: { type: 'exponential', delay: 1000 },
  removeOnComplete: true,
  removeOnFail: { age: 7 * 24 * 3600 },
};

async function withQueue(fn) {
  const name = `bench-${randomBytes(4).toString('hex')}`;
  const producer = forkRole(import.meta.url, { role: 'producer', name });
  const workers = [];
  const startWorker = async () => {
    const w = forkRole(import.meta.url, { role: 'worker', name });
    workers.push(w);
    return w;
  };
  try {
    return await fn({ producer, startWorker, workers });
  } finally {
    for (const w of workers) w.kill('SIGKILL');
    await producer.call('obliterate').catch(() => {});
    producer.kill('SIGKILL');
  }
}

/**
 * Drain: `total` jobs queued first, then the worker process starts; steady window of the deliveries
 * (lib/window.js) with the worker's and Redis's CPU.
 */
export function drain({ subscriber, total, limits }) {
  return withQueue(async ({ producer, startWorker, workers }) => {
    await producer.call('fill', { url: subscriber.url('/hook/0'), total });
    const groups = { queue: () => workers.map((w) => w.pid) };
    return measureSteady(subscriber, total, { groups, db: { kind: 'redis' }, limits }, async () => {
      const start = now();
      await startWorker();
      return { start };
    });
  });
}

/**
 * End to end: worker running, then jobs added with 32 in flight while it delivers, until the window's
 * last mark. The producer's CPU counts with the worker's: it does the inserts hookline's API does.
 */
export function endToEnd({ subscriber, total, limits }) {
  return withQueue(async ({ producer, startWorker }) => {
    const worker = await startWorker();
    await worker.waitEvent((m) => m.event === 'ready');
    const groups = { queue: () => [worker.pid, producer.pid] };
    return measureSteady(subscriber, total, { groups, db: { kind: 'redis' }, limits }, async () => {
      return streamBounded(subscriber, producer, 100 * total);
    });
  });
}

function producerMain(name) {
  const queue = new Queue(name, { connection, defaultJobOptions: jobOptions });
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
          jobs.push({ name: 'deliver', data: { url, data: eventData(j) } });
        await queue.addBulk(jobs);
      }
      return { total };
    },
    stream: ({ url, total, concurrency, allowUpTo = Infinity }) => {
      allowed = allowUpTo;
      return streamAdds(
        total,
        concurrency,
        (i, t0) => queue.add('deliver', { url, data: eventData(i, t0) }),
        () => stopped,
        () => allowed,
      );
    },
    async obliterate() {
      await queue.obliterate({ force: true });
      await queue.close();
    },
  });
}

function workerMain(name) {
  const secret = newSecret();
  const pools = new Map();
  const pool = (origin) => {
    if (!pools.has(origin)) pools.set(origin, new Pool(origin, { connections: 64, pipelining: 1 }));
    return pools.get(origin);
  };
  const worker = new Worker(
    name,
    async (job) => {
      const target = new URL(job.data.url);
      const body = deliveryBody(job.data.data);
      const res = await pool(target.origin).request({
        path: target.pathname,
        method: 'POST',
        headers: signedHeaders(secret, `msg_${job.id}`, body),
        body,
        headersTimeout: 15_000,
        bodyTimeout: 15_000,
      });
      await res.body.dump();
      if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`HTTP ${res.statusCode}`);
    },
    { connection, concurrency: 64 },
  );
  worker.on('error', () => {});
  serveRequests({});
  worker.waitUntilReady().then(() => process.send({ event: 'ready' }));
}

if (isMain(import.meta.url)) {
  const { role, name } = childOptions();
  if (role === 'producer') producerMain(name);
  else workerMain(name);
}
