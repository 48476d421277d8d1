// The delivery work of `hookline serve`, in a worker thread of its own (docs/contract.md §8): fan-out,
// claims and HTTP attempts never share an event loop with the API's emits, so an emit's latency does
// not depend on how much delivery is under way. The thread has its own database connection; the main
// thread wakes it on new work, asks it for its metrics, and stops it. This file is both sides: the
// handle the main thread uses, and (run as the thread) the loop inside.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { Config } from '../config.js';
import { createContext } from '../context.js';
import type { Db } from '../store/db.js';
import { startQueueSampler } from './queue-sampler.js';
import { startRetention } from './retention.js';
import { DELIVERY_THREAD_NICE, lowerThreadPriority } from './thread-priority.js';
import { DeliveryWorker, type WorkerOptions } from './worker.js';
import type { WakeKind } from '../store/work-signal.js';

/** The shortest time between two wake messages to the thread. */
const WAKE_SPACING_MS = 2;

type Metric = MetricObjectWithValues<MetricValue<string>>;

type ToThread =
  { type: 'wake'; kind: WakeKind } | { type: 'stop'; graceMs: number } | { type: 'metrics'; id: number };
type FromThread =
  | { type: 'ready' }
  | { type: 'failed'; message: string }
  | { type: 'stopped' }
  | { type: 'metrics'; id: number; metrics: Metric[] };

interface ThreadData {
  config: Config;
  workerOptions: WorkerOptions;
  /** What the thread's connection shares with the API thread's (store/db.ts, threadShare). */
  threadShare: SharedArrayBuffer | null;
}

export class DeliveryThread {
  private readonly worker: Worker;
  private readonly replies = new Map<number, (metrics: Metric[]) => void>();
  private nextId = 0;
  private exited = false;
  private readonly exit: Promise<void>;

  private constructor(
    config: Config,
    workerOptions: WorkerOptions,
    db: Db,
    private readonly logger: Logger,
  ) {
    const data: ThreadData = { config, workerOptions, threadShare: db.threadShare() };
    this.worker = new Worker(new URL(import.meta.url), { workerData: data });
    // Read now: a Worker's threadId is -1 once it has exited.
    const threadId = this.worker.threadId;
    this.worker.on('message', (m: FromThread) => {
      if (m.type === 'metrics') {
        this.replies.get(m.id)?.(m.metrics);
        this.replies.delete(m.id);
      }
    });
    this.worker.on('error', (err) => this.logger.error({ err }, 'delivery thread crashed'));
    this.exit = new Promise((resolve) =>
      this.worker.once('exit', () => {
        this.exited = true;
        db.threadExited(threadId);
        for (const reply of this.replies.values()) reply([]);
        this.replies.clear();
        resolve();
      }),
    );
  }

  /** Starts the thread and resolves once its worker is running. */
  static async start(
    config: Config,
    workerOptions: WorkerOptions,
    db: Db,
    logger: Logger,
  ): Promise<DeliveryThread> {
    const thread = new DeliveryThread(config, workerOptions, db, logger);
    await new Promise<void>((resolve, reject) => {
      thread.worker.on('message', (m: FromThread) => {
        if (m.type === 'ready') resolve();
        if (m.type === 'failed') reject(new Error(`delivery thread could not start: ${m.message}`));
      });
      void thread.exit.then(() => reject(new Error('delivery thread exited during start-up')));
    });
    return thread;
  }

  private send(message: ToThread): void {
    if (!this.exited) this.worker.postMessage(message);
  }

  /**
   * New work may be waiting (an emit, a replay, a re-enabled endpoint). A message to a thread costs
   * more than the commit of an emit, so at most one goes per WAKE_SPACING_MS: the first at once, and
   * one more at the end of the interval if any commit asked meanwhile.
   */
  wake(kind: WakeKind = 'work'): void {
    if (this.wakeSpacing) {
      this.wakeAgain.add(kind);
      return;
    }
    this.send({ type: 'wake', kind });
    this.wakeSpacing = setTimeout(() => {
      this.wakeSpacing = null;
      const again = [...this.wakeAgain];
      this.wakeAgain.clear();
      // A replay job's wake-up wakes for other work too (delivery/worker.ts).
      if (again.length > 0) this.wake(again.includes('replay') ? 'replay' : 'work');
    }, WAKE_SPACING_MS);
  }

  private wakeSpacing: NodeJS.Timeout | null = null;
  private readonly wakeAgain = new Set<WakeKind>();

  /** The thread's own counters and histograms, for /metrics. */
  metrics(): Promise<Metric[]> {
    if (this.exited) return Promise.resolve([]);
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.replies.set(id, resolve);
      this.send({ type: 'metrics', id });
    });
  }

  /** Lets attempts in flight finish until `graceMs` (as DeliveryWorker.stop), then ends the thread. */
  async stop(graceMs: number): Promise<void> {
    if (this.wakeSpacing) clearTimeout(this.wakeSpacing);
    this.send({ type: 'stop', graceMs });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.exit, new Promise((r) => (timer = setTimeout(r, graceMs + 10_000)))]);
    clearTimeout(timer);
    if (!this.exited) await this.worker.terminate();
  }
}

/** Inside the thread: run the worker until told to stop. */
async function runThread(port: NonNullable<typeof parentPort>, data: ThreadData): Promise<void> {
  const post = (m: FromThread) => port.postMessage(m);
  // Emits before deliveries when the cores are busy (delivery/thread-priority.ts).
  lowerThreadPriority(DELIVERY_THREAD_NICE);
  let ctx;
  try {
    ctx = await createContext(data.config, {
      sharedMetrics: false,
      processMetrics: false,
      ...(data.threadShare ? { threadShare: data.threadShare } : {}),
    });
  } catch (err) {
    post({ type: 'failed', message: err instanceof Error ? err.message : String(err) });
    return;
  }
  const worker = new DeliveryWorker(ctx, data.workerOptions);
  await worker.start();
  const stopSampler = startQueueSampler(ctx);
  const stopRetention = startRetention(ctx);
  port.on('message', (m: ToThread) => {
    // The other processes were told by whoever asked the main thread to wake this one.
    if (m.type === 'wake') ctx.signal.wakeHere(m.kind);
    else if (m.type === 'metrics') {
      void ctx.metrics.registry
        .getMetricsAsJSON()
        .then((metrics) => post({ type: 'metrics', id: m.id, metrics: metrics as Metric[] }));
    } else if (m.type === 'stop') {
      void (async () => {
        stopSampler();
        stopRetention();
        await worker.stop(m.graceMs);
        await ctx.signal.close();
        await ctx.db.close();
        // This thread's own span exporter (telemetry/tracing.ts): flushed before the thread ends.
        await ctx.tracing.shutdown();
        post({ type: 'stopped' });
        port.close();
      })();
    }
  });
  post({ type: 'ready' });
}

if (!isMainThread && parentPort && (workerData as ThreadData | undefined)?.config) {
  void runThread(parentPort, workerData as ThreadData);
}
