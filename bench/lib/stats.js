// Small numeric helpers shared by the orchestrator and the child processes.

/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes on one machine. */
export const now = () => performance.timeOrigin + performance.now();

/** Nearest-rank percentile of an array (or typed array) that is already sorted ascending. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

/** p50/p99/max of a list of samples (milliseconds); the list is copied, not changed. */
export function summarize(samples) {
  const sorted = Float64Array.from(samples).sort();
  return {
    n: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1] : NaN,
  };
}

export function median(values) {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return NaN;
  const mid = Math.floor(finite.length / 2);
  return finite.length % 2 ? finite[mid] : (finite[mid - 1] + finite[mid]) / 2;
}

/** A growable Float64Array: keeps a million samples without a million boxed numbers. */
export class Samples {
  constructor(capacity = 4096) {
    this.data = new Float64Array(capacity);
    this.length = 0;
  }
  push(value) {
    if (this.length === this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    this.data[this.length++] = value;
  }
  view() {
    return this.data.subarray(0, this.length);
  }
  clear() {
    this.length = 0;
  }
}

/** Formats a number for the table: thousands separators, fixed decimals, '-' when not measured. */
export function fmt(value, decimals = 0) {
  if (!Number.isFinite(value)) return '-';
  return value.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Deliveries per second from `start` to the last delivery of a subscriber `waitFor` answer. A run cut
 * short by its time budget still yields a rate over what arrived (`partial`); a stalled one does not.
 */
export function deliveryRate(r, start) {
  if (r.done) return { rate: (r.n / (r.at - start)) * 1000, partial: false };
  if (r.reason === 'deadline' && r.count > 0)
    return { rate: (r.count / (r.last - start)) * 1000, partial: true };
  return { rate: NaN, partial: false };
}

/**
 * Runs `add(i, sentAt)` for i = 0 … total-1 with `concurrency` calls in flight, or until `stopped()`:
 * a producer adding jobs while delivery runs. Answers the rate and the latency of one add.
 */
export async function streamAdds(total, concurrency, add, stopped = () => false, allowed = () => Infinity) {
  const latencies = new Samples();
  let next = 0;
  const start = now();
  const loop = async () => {
    while (next < total && !stopped()) {
      if (next >= allowed()) {
        await sleep(1);
        continue;
      }
      const t0 = now();
      await add(next++, t0);
      latencies.push(now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return { rate: (next / (now() - start)) * 1000, ...summarize(latencies.view()) };
}

/** Deliveries an end-to-end producer may be ahead of the subscriber (boundBacklog). */
export const E2E_BACKLOG = 2000;

/**
 * Keeps an end-to-end producer at most `backlog` deliveries ahead of what the subscriber has counted
 * (polled every 20 ms; `perEvent` deliveries per event): the run then measures the rate the whole
 * path sustains, at the work per delivery of a steady state. Unbounded, a producer that outruns
 * delivery grows a backlog through the window, and every figure per delivery carries the extra emits
 * and fan-out. `allow(upTo)` tells the producer the last event number it may send; answers `stop`.
 */
export function boundBacklog(subscriber, allow, perEvent = 1, backlog = E2E_BACKLOG) {
  let stopped = false;
  const ahead = Math.ceil(backlog / perEvent);
  const poll = async () => {
    while (!stopped) {
      const { count } = await subscriber.call('stats');
      await allow(Math.floor(count / perEvent) + ahead);
      await sleep(20);
    }
  };
  const done = poll().catch(() => {});
  return async () => {
    stopped = true;
    await done;
  };
}

/**
 * A baseline's end-to-end producer: its `stream` of adds (32 in flight) to the subscriber's first
 * hook, kept within E2E_BACKLOG of delivery through its `allow` (boundBacklog), ended by its `stop`.
 * Answers what measureSteady's start callback answers.
 */
export function streamBounded(subscriber, producer, total) {
  const url = subscriber.url('/hook/0');
  const adds = producer.call('stream', { url, total, concurrency: 32, allowUpTo: E2E_BACKLOG });
  const unbound = boundBacklog(subscriber, (upTo) => producer.call('allow', { upTo }));
  const finish = () =>
    unbound()
      .then(() => producer.call('stop'))
      .then(() => adds);
  return { start: now(), finish };
}
