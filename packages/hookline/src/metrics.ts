// Prometheus metrics. One registry per Context, so tests that run several services in one process
// do not share counters.
import {
  AggregatorRegistry,
  collectDefaultMetrics,
  Counter,
  Gauge,
  Histogram,
  Registry,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';
import { REFUSAL_REASONS } from './net/index.js';
import type { Db } from './store/db.js';
import { queueTotals } from './store/endpoint-queues.js';
import { countDeadLetters } from './store/dead-letters.js';
import { countAwaitingFanout } from './store/messages.js';

type Metric = MetricObjectWithValues<MetricValue<string>>;

const PREFIX = 'hookline_';

/** How often the event-loop delay is sampled (prom-client's default, said here so it is known). */
const EVENT_LOOP_SAMPLE_MS = 10;

/**
 * prom-client's event-loop figures read from a histogram of delays it empties at every scrape. Until
 * the next sample (one per EVENT_LOOP_SAMPLE_MS of a running loop) the histogram is empty, and its
 * minimum reads as 2^63 ns (9223372036.85 s), its mean and deviation as NaN: those are not figures.
 */
const EVENT_LOOP_DELAY = /^hookline_nodejs_eventloop_lag_(min|max|mean|stddev|p50|p90|p99)_seconds$/;

/** Drops the event-loop delay figures of a scrape that had no sample of it since the one before. */
function withoutEmptyLoopDelay(metrics: Metric[]): Metric[] {
  const value = (name: string) => metrics.find((m) => m.name === name)?.values[0]?.value;
  const min = value(`${PREFIX}nodejs_eventloop_lag_min_seconds`);
  const max = value(`${PREFIX}nodejs_eventloop_lag_max_seconds`);
  // With one sample or more the minimum is at most the maximum.
  if (min === undefined || max === undefined || min <= max) return metrics;
  return metrics.map((m) => (EVENT_LOOP_DELAY.test(m.name) ? { ...m, values: [] } : m));
}

export class Metrics {
  readonly registry = new Registry();
  readonly deliveries = new Counter({
    name: 'hookline_delivery_attempts_total',
    help: 'Delivery attempts by outcome: succeeded, failed (will retry), dead',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  /** Attempts refused before reaching the subscriber, by reason (delivery/refusal-warnings.ts). */
  readonly refusals = new Counter({
    name: 'hookline_delivery_refusals_total',
    help: 'Delivery attempts refused before reaching the subscriber: ssrf (private address at connect), tls (handshake or certificate), proxy (egress proxy refused or unreachable)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly attemptSeconds = new Histogram({
    name: 'hookline_delivery_attempt_duration_seconds',
    help: 'Duration of one HTTP delivery attempt',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly emitSeconds = new Histogram({
    name: 'hookline_emit_duration_seconds',
    help: 'Time from receiving an event to it being durable',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly emitted = new Counter({
    name: 'hookline_events_emitted_total',
    help: 'Events accepted by emit',
    registers: [this.registry],
  });

  /** Other registries whose figures /metrics adds to this one's (the delivery thread's). */
  private readonly sources: (() => Promise<Metric[]>)[] = [];

  /**
   * `defaults`: the process's own figures (CPU, memory, event loop, GC), which cover all its threads
   * where the figure is the process's (CPU time, memory) and the thread that made this registry
   * otherwise (heap, event loop). `shared`: the figures read from the database (queue depth, dead
   * letters), which one registry per process must collect, not each thread.
   */
  constructor(db: Db, now: () => number, defaults = true, shared = true) {
    // Every reason reads 0 until it happens, so an alert on its rate has a series from the start.
    for (const reason of REFUSAL_REASONS) this.refusals.inc({ reason }, 0);
    if (defaults) this.processGauges();
    if (shared) this.sharedGauges(db, now);
  }

  addSource(source: () => Promise<Metric[]>): void {
    this.sources.push(source);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The Prometheus text of this registry and its sources, counters and histograms summed. */
  async text(): Promise<string> {
    const own = withoutEmptyLoopDelay((await this.registry.getMetricsAsJSON()) as Metric[]);
    const sources = await Promise.all(this.sources.map((s) => s()));
    // prom-client's aggregation omits process_start_time_seconds ('omit': each cluster worker has
    // its own). Here only this registry has it, and a figure from one registry is kept as it is.
    const elsewhere = new Set(sources.flat().map((m) => m.name));
    const kept = own.map((m) =>
      m.aggregator === 'omit' && !elsewhere.has(m.name) ? { ...m, aggregator: 'first' as const } : m,
    );
    return AggregatorRegistry.aggregate([kept, ...sources]).metrics();
  }

  private processGauges(): void {
    // prom-client counts CPU time from its registration on (its own baseline); the process has been
    // running since before, so what it used until then is added once.
    const before = process.cpuUsage();
    collectDefaultMetrics({
      register: this.registry,
      prefix: PREFIX,
      eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS,
    });
    const counter = (name: string) =>
      this.registry.getSingleMetric(`${PREFIX}${name}`) as Counter | undefined;
    counter('process_cpu_user_seconds_total')?.inc(before.user / 1e6);
    counter('process_cpu_system_seconds_total')?.inc(before.system / 1e6);
    counter('process_cpu_seconds_total')?.inc((before.user + before.system) / 1e6);
  }

  private sharedGauges(db: Db, now: () => number): void {
    // Queue depth and dead letters are read from the database at scrape time: they are shared state
    // across processes, not something one process counts.
    const depth = new Gauge({
      name: 'hookline_queue_depth',
      help: 'Deliveries waiting: due (ready now), scheduled (waiting for a retry), delivering; and messages awaiting fan-out',
      labelNames: ['state'] as const,
      registers: [this.registry],
      async collect() {
        const d = await queueTotals(db, now());
        this.set({ state: 'due' }, d.due);
        this.set({ state: 'scheduled' }, d.scheduled);
        this.set({ state: 'delivering' }, d.delivering);
        this.set({ state: 'awaiting_fanout' }, await countAwaitingFanout(db));
      },
    });
    const deadLetters = new Gauge({
      name: 'hookline_dead_letters',
      help: 'Dead-letter records stored',
      registers: [this.registry],
      async collect() {
        this.set((await countDeadLetters(db)).stored);
      },
    });
    // The console's overview count and badge (admin/overview-service.ts): the same counter.
    const deadLettersAwaiting = new Gauge({
      name: 'hookline_dead_letters_awaiting',
      help: 'Dead letters awaiting an operator: not replayed, or whose latest replay died or was cancelled',
      registers: [this.registry],
      async collect() {
        this.set((await countDeadLetters(db)).awaiting);
      },
    });
    void depth;
    void deadLetters;
    void deadLettersAwaiting;
  }
}
