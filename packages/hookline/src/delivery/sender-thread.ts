// The webhook sender run in a thread of its own (docs/architecture.md, "Sending"), by a worker on
// SQLite (sendsFromThread below). A worker's main thread claims, decrypts,
// signs and records outcomes; the HTTP work of its attempts (requests, answers, the socket writes)
// was about a third of that thread's CPU, and it was the thread's limit.
// Here the attempts of one turn of the event loop cross to the sender thread in one message and their
// results come back, one message per turn there, so a crossing costs a few microseconds per attempt.
// This file is both sides: the handle the worker uses, and (run as the thread) the loop inside. It
// must run compiled: a thread cannot load the TypeScript sources.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { isPostgresUrl } from '../database-url.js';
import {
  notSent,
  Sender,
  type SendRequest,
  type SendResult,
  type SenderOptions,
  type Sending,
} from './sender.js';

/**
 * Whether a worker on this database sends from a thread of its own. On SQLite its main thread runs
 * the SQL itself, and the HTTP work is better off elsewhere; on PostgreSQL the SQL runs in the server,
 * the main thread has room for the HTTP work, and each hop to and from a thread costs latency: there
 * drains ran 5-7 % faster without it (docs/architecture.md, "Sending"). `databaseUrl` as
 * HOOKLINE_DATABASE_URL gives it: unset or `sqlite:` is SQLite.
 */
export function sendsFromThread(databaseUrl: string | undefined): boolean {
  return !isPostgresUrl(databaseUrl?.trim() ?? '');
}

/** A batch of attempts, flattened: id, url, headers, body for each. */
type ToThread = { type: 'send'; batch: unknown[] } | { type: 'abortAll' } | { type: 'close' };
/** 'ready' once, then results, flattened: id, result for each. */
type FromThread = 'ready' | unknown[];

interface ThreadData {
  hooklineSender: true;
  senderOptions: SenderOptions;
}

export class SenderThread implements Sending {
  private worker: Worker | null = null;
  private ready: Promise<void> = Promise.resolve();
  private readonly pending = new Map<number, (result: SendResult) => void>();
  private nextId = 0;
  private outgoing: unknown[] = [];
  private closed = false;

  /** `onStopped` hears of a thread that ended on its own; its attempts fail, and the next send starts another. */
  constructor(
    private readonly options: SenderOptions,
    private readonly onStopped: (reason: string) => void = () => {},
  ) {}

  /**
   * Starts the thread; resolves once it can send. Started lazily instead, the first attempts would
   * wait for it (tens of milliseconds) and then leave together with later ones, out of an endpoint's
   * rate-limit pace.
   */
  start(): Promise<void> {
    this.thread();
    return this.ready;
  }

  send(req: SendRequest): Promise<SendResult> {
    if (this.closed) return Promise.resolve(notSent('attempt cancelled'));
    const id = this.nextId++;
    // The attempts a dispatch starts together leave in one message, once the current task is done.
    if (this.outgoing.length === 0) queueMicrotask(() => this.post());
    this.outgoing.push(id, req.url, req.headers, req.body);
    return new Promise<SendResult>((resolve) => this.pending.set(id, resolve));
  }

  /** Ends every attempt in flight at once (their results say they timed out), as Sender.abortAll. */
  abortAll(): void {
    this.worker?.postMessage({ type: 'abortAll' } satisfies ToThread);
  }

  async close(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    if (!worker) return;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.postMessage({ type: 'close' } satisfies ToThread);
    await exited;
  }

  private post(): void {
    const batch = this.outgoing;
    this.outgoing = [];
    if (!this.closed) return this.thread().postMessage({ type: 'send', batch } satisfies ToThread);
    // Closed since these were sent: they are cancelled, and no thread is started for them.
    for (let i = 0; i < batch.length; i += 4) this.settle(batch[i] as number, notSent('attempt cancelled'));
  }

  private settle(id: number, result: SendResult): void {
    this.pending.get(id)?.(result);
    this.pending.delete(id);
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(new URL(import.meta.url), {
      workerData: { hooklineSender: true, senderOptions: this.options } satisfies ThreadData,
    });
    let started!: () => void;
    this.ready = new Promise((resolve) => (started = resolve));
    worker.on('message', (results: FromThread) => {
      if (results === 'ready') return started();
      for (let i = 0; i < results.length; i += 2)
        this.settle(results[i] as number, results[i + 1] as SendResult);
    });
    let failure = '';
    worker.on('error', (err) => (failure = err.message));
    worker.once('exit', (code) => {
      this.worker = null;
      started();
      // Whatever is still pending never got an answer back: failed attempts, retried as any other.
      const reason = this.closed
        ? 'attempt cancelled'
        : `sender thread stopped (${failure || `exit ${code}`})`;
      for (const resolve of this.pending.values()) resolve(notSent(reason));
      this.pending.clear();
      if (!this.closed) this.onStopped(reason);
    });
    this.worker = worker;
    return worker;
  }
}

/** Inside the thread: send what arrives, answer each turn's results in one message. */
function runThread(port: NonNullable<typeof parentPort>, options: SenderOptions): void {
  const sender = new Sender(options);
  let results: unknown[] = [];
  const flush = () => {
    const batch = results;
    results = [];
    port.postMessage(batch);
  };
  const done = (id: unknown) => (result: SendResult) => {
    if (results.length === 0) setImmediate(flush);
    results.push(id, result);
  };
  port.on('message', (m: ToThread) => {
    if (m.type === 'send') {
      const b = m.batch;
      for (let i = 0; i < b.length; i += 4) {
        const req = { url: b[i + 1], headers: b[i + 2], body: b[i + 3] } as SendRequest;
        void sender.send(req).then(done(b[i]));
      }
    } else if (m.type === 'abortAll') sender.abortAll();
    else if (m.type === 'close') {
      void sender.close().then(() => {
        if (results.length > 0) flush();
        port.close();
      });
    }
  });
  port.postMessage('ready' satisfies FromThread);
}

const threadData = workerData as ThreadData | undefined;
if (!isMainThread && parentPort && threadData?.hooklineSender)
  runThread(parentPort, threadData.senderOptions);
