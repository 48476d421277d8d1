// Prometheus metrics. One registry per Context, so tests that run several services in one process
// do not share counters.
import { createRequire } from 'node:module';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { Db } from './store/db.js';
import { queueTotals } from './store/endpoint-queues.js';
import { countDeadLetters } from './store/dead-letters.js';
import { countAwaitingFanout } from './store/messages.js';

// prom-client's entry point also loads its process metrics, and through them @opentelemetry/api: most
// of the 36–45 ms it took to load, which every process paid on its way to its first delivery. The
// classes counting from the start are loaded from their own modules (~4 ms; the package has no export
// map to forbid it); the rest loads when /metrics is first read.
const load = createRequire(import.meta.url);
type PromClient = typeof import('prom-client');
const Registry = load('prom-client/lib/registry') as PromClient['Registry'];
const Counter = load('prom-client/lib/counter') as PromClient['Counter'];
const Gauge = load('prom-client/lib/gauge') as PromClient['Gauge'];
const Histogram = load('prom-client/lib/histogram') as PromClient['Histogram'];

export class Metrics {
  readonly registry = new Registry();
  readonly deliveries = new Counter({
    name: 'hookline_delivery_attempts_total',
    help: 'Delivery attempts by outcome: succeeded, failed (will retry), dead',
    labelNames: ['outcome'] as const,
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

  /** The process's own figures (CPU, memory, event loop, GC) are still to be registered. */
  private defaultsPending: boolean;
  /** Other registries whose figures /metrics adds to this one's (the delivery thread's). */
  private readonly sources: (() => Promise<MetricObjectWithValues<MetricValue<string>>[]>)[] = [];

  /**
   * `defaults`: the process's own figures (CPU, memory). `shared`: the figures read from the database
   * (queue depth, dead letters), which one registry per process must collect, not each thread.
   */
  constructor(db: Db, now: () => number, defaults = true, shared = true) {
    this.defaultsPending = defaults;
    if (shared) this.sharedGauges(db, now);
  }

  addSource(source: () => Promise<MetricObjectWithValues<MetricValue<string>>[]>): void {
    this.sources.push(source);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The Prometheus text of this registry and its sources, counters and histograms summed. */
  async text(): Promise<string> {
    const { AggregatorRegistry, collectDefaultMetrics } = await import('prom-client');
    // Registered at the first scrape: CPU time and memory are the process's whole life all the same;
    // GC and event-loop figures count from then.
    if (this.defaultsPending) {
      this.defaultsPending = false;
      collectDefaultMetrics({ register: this.registry, prefix: 'hookline_' });
    }
    if (this.sources.length === 0) return this.registry.metrics();
    const all = await Promise.all([this.registry.getMetricsAsJSON(), ...this.sources.map((s) => s())]);
    return AggregatorRegistry.aggregate(all).metrics();
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
