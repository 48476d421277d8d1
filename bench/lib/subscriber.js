// The webhook subscriber, in its own process: a plain node:http server on 127.0.0.1.
//   ok    answers 204 as soon as the body is in; counts each (path, hook-id) once and records the
//         emit-to-delivery latency from `data.sentAt`
//   hang  accepts the request and never answers
//   down  does not listen (connections are refused) until told `up`
//   flaky as ok, but answers 500 at once to 10 % of requests at random (not counted as deliveries);
//         for keyed events (data.orderingKey) it keeps each one's first attempt and first 2xx per path
//         (`keyed`), for keyed lag and key handoffs
// The orchestrator asks it over IPC for counts, for the time of the n-th delivery, and to wait until
// n deliveries have arrived (reporting a stall when none arrive for a while).
//
// It stands for a subscriber's long-running server, so it starts warm: before it reports ready it
// answers WARM_UP_POSTS signed POSTs of its own, which are then forgotten. Started cold, its first
// ~2,000 requests ran at a fraction of the warm rate while V8 compiled its code. A steady window
// (lib/window.js) leaves that out anyway; the time to the first delivery and the small runs
// (backlog, rate limit, memory) would still pay for it. Each case starts one subscriber and
// `reset`s it between its runs.
import { createServer } from 'node:http';
import { Pool } from 'undici';
import { postAll, signedPosts } from './payload.js';
import { childOptions, forkRole, isMain, serveRequests } from './processes.js';
import { Samples, deliveryRate, now, summarize } from './stats.js';

/** Orchestrator side: forks a subscriber on `port` and waits until it is listening (or not, if down). */
export async function startSubscriber({ port, mode = 'ok' }) {
  const child = forkRole(import.meta.url, { port, mode });
  await child.waitEvent((m) => m.event === 'ready');
  child.url = (path = '/hook') => `http://127.0.0.1:${port}${path}`;
  return child;
}

/**
 * Waits for `n` deliveries counted from `start` (epoch ms) and adds the delivery rate from `start`
 * and the time to the first delivery; gives up after `stallMs` without a delivery or `budgetMs` in
 * all (then the rate covers what arrived, `partial`).
 */
export async function awaitDeliveries(subscriber, n, start, { stallMs = 60_000, budgetMs = Infinity } = {}) {
  const r = await subscriber.call('waitFor', { n, stallMs, deadline: start + budgetMs });
  return { ...r, ...deliveryRate(r, start), start, firstAfterMs: r.first === null ? NaN : r.first - start };
}

const WARM_UP_POSTS = 2000;
/** The share of requests a `flaky` subscriber answers 500. */
const FLAKY_FAILURES = 0.1;

/** Sends `count` signed ~1 KiB POSTs, 64 at a time, to this process's own server at `origin`. */
async function warmUp(origin, count) {
  const pool = new Pool(origin, { connections: 64, pipelining: 1 });
  await postAll(pool, signedPosts('/warm-up', count, 'msg_warm_'), 64);
  await pool.close();
}

function main() {
  const { port, mode: initialMode } = childOptions();
  let mode = initialMode;
  const seen = new Set();
  const arrivals = new Samples();
  const latencies = new Samples();
  let total = 0;
  let hanging = 0;
  let lastArrival = now();
  const waiters = new Set();
  let marks = new Set(); // delivery counts at which to tell the orchestrator (lib/window.js)
  const keyed = new Map(); // `${path} ${hook-id}` → [path, seq, key, first attempt, first 2xx or null]

  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (mode === 'hang') {
        hanging++;
        return;
      }
      const key = `${req.url} ${req.headers['hook-id']}`;
      const failed = mode === 'flaky' && Math.random() < FLAKY_FAILURES;
      if (mode === 'flaky') noteKeyed(key, req.url, chunks, failed);
      if (failed) {
        res.writeHead(500).end();
        return;
      }
      res.writeHead(204).end();
      total++;
      if (seen.has(key)) return;
      seen.add(key);
      const at = now();
      lastArrival = at;
      arrivals.push(at);
      if (marks.has(arrivals.length)) process.send({ event: 'mark', k: arrivals.length, at });
      try {
        const sentAt = JSON.parse(Buffer.concat(chunks).toString()).data?.sentAt;
        if (typeof sentAt === 'number') latencies.push(at - sentAt);
      } catch {
        // not JSON: counted, no latency
      }
      for (const w of waiters) if (arrivals.length >= w.n) w.finish(true);
    });
  });
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 0;
  server.requestTimeout = 0;
  const sockets = new Set();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });

  function noteKeyed(key, path, chunks, failed) {
    let k = keyed.get(key);
    if (!k) {
      let data;
      try {
        data = JSON.parse(Buffer.concat(chunks).toString()).data;
      } catch {
        return;
      }
      if (typeof data?.orderingKey !== 'string') return;
      const at = now();
      // A first attempt that succeeds has its 2xx at the same time (no failed attempt before it).
      keyed.set(key, [path, data.seq, data.orderingKey, at, failed ? null : at]);
      return;
    }
    if (!failed && k[4] === null) k[4] = now();
  }

  const listen = () => new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
  const stats = () => ({
    count: arrivals.length,
    total,
    duplicates: total - arrivals.length,
    hanging,
    first: arrivals.length ? arrivals.data[0] : null,
    last: arrivals.length ? arrivals.data[arrivals.length - 1] : null,
  });

  const reset = () => {
    seen.clear();
    arrivals.clear();
    latencies.clear();
    marks = new Set();
    keyed.clear();
    total = 0;
    hanging = 0;
    lastArrival = now();
  };

  serveRequests({
    stats,
    /** Time of the k-th delivery (1-based), or null if fewer have arrived. */
    timeOf: ({ k }) => (k >= 1 && k <= arrivals.length ? arrivals.data[k - 1] : null),
    /** Emit-to-delivery latency of the deliveries numbered from..to (1-based, inclusive). */
    latency: ({ from = 1, to = arrivals.length } = {}) =>
      summarize(latencies.view().subarray(Math.max(0, from - 1), Math.min(to, latencies.length))),
    reset,
    /** Keyed events seen (flaky mode): [path, seq, key, first attempt, first 2xx or null] each. */
    keyed: () => [...keyed.values()],
    /** Sends {event: 'mark', k} when the k-th delivery arrives, for each k of `marks`. */
    marks: ({ marks: ks }) => {
      marks = new Set(ks);
    },
    up: async () => {
      mode = 'ok';
      if (!server.listening) await listen();
    },
    /**
     * Resolves once `n` deliveries have arrived ({done: true, at}), or with {done: false} when none
     * arrived for `stallMs`, or when `deadline` (epoch ms) passed.
     */
    waitFor: ({ n, stallMs = 60_000, deadline = Infinity }) =>
      new Promise((resolve) => {
        const w = {
          n,
          finish: (done, reason) => {
            clearInterval(timer);
            waiters.delete(w);
            resolve({ done, reason, n, at: done ? arrivals.data[n - 1] : null, ...stats() });
          },
        };
        const timer = setInterval(() => {
          if (now() - lastArrival > stallMs) w.finish(false, 'stalled');
          else if (now() > deadline) w.finish(false, 'deadline');
        }, 100);
        waiters.add(w);
        lastArrival = Math.max(lastArrival, now() - 1);
        if (arrivals.length >= n) w.finish(true);
      }),
  });

  (async () => {
    if (mode !== 'down') await listen();
    if (mode === 'ok' || mode === 'flaky') {
      await warmUp(`http://127.0.0.1:${port}`, WARM_UP_POSTS);
      reset();
    }
    process.send({ event: 'ready' });
  })();
}

if (isMain(import.meta.url)) main();
