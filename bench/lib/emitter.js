// The producer, in its own process: POST /v1/events over HTTP (undici Pool), either closed-loop with
// `concurrency` requests in flight or paced at `rate` per second. Each event carries its send time
// in data.sentAt so the subscriber can measure emit-to-delivery latency. Answers with counts, the
// achieved rate and emit latency percentiles (the first `warmup` emits are left out of both; `all`
// has the percentiles with them).
import { Pool } from 'undici';
import { childOptions, forkRole, isMain, serveRequests } from './processes.js';
import { EVENT_TYPE, eventData } from './payload.js';
import { Samples, now, sleep, summarize } from './stats.js';

/** Orchestrator side: runs one emitter process to completion and resolves with its summary. */
export async function emit(options, { onProgress } = {}) {
  // A young generation large enough that the emitter's own garbage dies young: with Node's default,
  // the emitter ran a major GC every ~1.3 s at 9,000 emits/s, and its 5-25 ms pauses were in every
  // latency it measured (a no-op route's paced p99 14-16 ms; with this, 3-7 ms). bench/HISTORY.md,
  // "Session of run Y".
  const child = forkRole(import.meta.url, options, { execArgv: ['--max-semi-space-size=64'] });
  if (onProgress) child.onEvent((m) => m.event === 'progress' && onProgress(m));
  try {
    return await child.call('run');
  } finally {
    child.kill('SIGKILL');
  }
}

/**
 * Orchestrator side: starts an emitter and answers at once with its `pid`, `done` (a promise of its
 * summary) and `stop()`, which ends it early (an end-to-end case emits until its window is measured).
 */
export function startEmitter(options) {
  const child = forkRole(import.meta.url, options, { execArgv: ['--max-semi-space-size=64'] });
  const done = child.call('run').finally(() => child.kill('SIGKILL'));
  return {
    pid: child.pid,
    done,
    stop: () => child.call('stop').catch(() => {}),
    /** Lets the closed loop send up to event number `upTo` (lib/stats.js, boundBacklog). */
    allow: (upTo) => child.call('allow', { upTo }).catch(() => {}),
  };
}

function main() {
  const o = childOptions();
  const {
    origin,
    path = '/v1/events',
    key,
    tenant = 'acme',
    concurrency = 32,
    total = Infinity,
    durationMs = Infinity,
    rate = 0,
    warmup = 0,
    retry = false,
    seqStart = 0,
    graceMs = Infinity,
    orderingKeys = 0,
    // With `keyedShare` < 1, that share of the events (at random) takes a key, the rest none.
    keyedShare = 1,
    // Keep each keyed emit's answer time (`acks` in the summary) and name its key in data.orderingKey,
    // so the subscriber and the orchestrator can measure keyed lag (lib/cases.js, keyedLagCase).
    recordAcks = false,
    // Closed loop only: send no further than this many events until told more (`allow`), so the
    // emitter stays a bounded backlog ahead of delivery (lib/stats.js, boundBacklog).
    allowUpTo = Infinity,
  } = o;
  let allowed = allowUpTo;
  const pool = new Pool(origin, {
    connections: rate ? (o.connections ?? 1024) : concurrency, // paced: never queue in the client
    pipelining: 1,
    keepAliveTimeout: 60_000,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
  const latencies = new Samples();
  const allLatencies = new Samples();
  const statuses = {};
  let sent = 0;
  let ok = 0;
  let failed = 0;
  let retries = 0;
  let inFlight = 0;
  let warmupDoneAt = null;
  let lastDone = 0;
  let stopped = false;
  const waiting = new Map(); // seq → send time of emits not answered yet
  const acks = []; // [seq, answered at] of keyed emits, with recordAcks

  async function once(seq) {
    // With `orderingKeys`, events take the keys user_0…user_{n-1} in turn (docs/delivery.md), or at
    // random when only a share of them is keyed.
    let orderingKey = null;
    if (orderingKeys > 0 && keyedShare >= 1) orderingKey = `user_${seq % orderingKeys}`;
    else if (orderingKeys > 0 && Math.random() < keyedShare)
      orderingKey = `user_${Math.floor(Math.random() * orderingKeys)}`;
    for (let attempt = 0; ; attempt++) {
      const event = { tenant_id: tenant, type: EVENT_TYPE, data: eventData(seq) };
      if (orderingKey !== null) event.ordering_key = orderingKey;
      if (orderingKey !== null && recordAcks) event.data.orderingKey = orderingKey;
      const body = JSON.stringify(event);
      const t0 = now();
      waiting.set(seq, t0);
      let status;
      try {
        const res = await pool.request({ path, method: 'POST', headers, body });
        status = res.statusCode;
        await res.body.dump();
      } catch (err) {
        status = err.code ?? 'error';
      }
      const t1 = now();
      waiting.delete(seq);
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status === 202 || status === 200) {
        ok++;
        lastDone = t1;
        if (seq - seqStart >= warmup) latencies.push(t1 - t0);
        allLatencies.push(t1 - t0);
        if (ok === warmup) warmupDoneAt = t1;
        if (recordAcks && orderingKey !== null) acks.push([seq, t1]);
        return;
      }
      // Fills retry refusals and 429/5xx answers; an emit unanswered for a minute is not retried.
      if (!retry || attempt >= 50 || status === 'UND_ERR_HEADERS_TIMEOUT') {
        failed++;
        return;
      }
      retries++;
      await sleep(Math.min(1000, 20 * 2 ** attempt));
    }
  }

  async function run() {
    const start = now();
    const end = start + durationMs;
    const progress = setInterval(() => process.send({ event: 'progress', ok, failed, sent }), 1000);
    const more = () => !stopped && sent < total && now() < end;
    if (rate > 0) {
      // Open loop: emit i is due at start + i/rate, whatever the answers do (bounded in-flight).
      const jobs = new Set();
      while (more()) {
        const due = Math.floor(((now() - start) * rate) / 1000) + 1;
        while (sent < due && more() && inFlight < 1024) {
          inFlight++;
          const p = once(seqStart + sent++).finally(() => {
            inFlight--;
            jobs.delete(p);
          });
          jobs.add(p);
        }
        await sleep(Math.max(1, Math.min(5, ((due * 1000) / rate + start - now()) | 0)));
      }
      // Answers still missing `graceMs` after the last emit count at their age so far (a lower bound).
      await Promise.race([Promise.all(jobs), sleep(graceMs)]);
      for (const t0 of waiting.values()) {
        const waited = now() - t0;
        latencies.push(waited);
        allLatencies.push(waited);
      }
    } else {
      const loop = async () => {
        while (more()) {
          if (sent >= allowed) {
            await sleep(1);
            continue;
          }
          await once(seqStart + sent++);
        }
      };
      await Promise.all(Array.from({ length: concurrency }, loop));
    }
    clearInterval(progress);
    const from = warmup > 0 ? (warmupDoneAt ?? lastDone) : start;
    const counted = ok - Math.min(ok, warmup);
    const unanswered = waiting.size;
    await (unanswered ? pool.destroy() : pool.close());
    return {
      unanswered,
      startedAt: start,
      sent,
      ok,
      failed,
      retries,
      statuses,
      elapsedMs: lastDone - start,
      rate: counted > 0 ? (counted / (lastDone - from)) * 1000 : NaN,
      ...summarize(latencies.view()),
      all: summarize(allLatencies.view()),
      ...(recordAcks ? { acks } : {}),
    };
  }

  serveRequests({
    run,
    stop: () => {
      stopped = true;
    },
    allow: ({ upTo }) => {
      allowed = upTo;
    },
  });
}

if (isMain(import.meta.url)) main();
