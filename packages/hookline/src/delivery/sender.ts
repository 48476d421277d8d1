// A webhook attempt. It protects hookline from its subscribers: private addresses are refused inside
// DNS resolution (so it connects only to the address it checked), redirects are not followed, the
// whole attempt has one deadline, and at most a few KiB of any answer is read. The HTTP exchange
// itself is delivery/http1-client.ts.
import { rootCertificates } from 'node:tls';
import { assertHostAllowed, createGuardedLookup } from '../net/index.js';
import { parseRetryAfter } from '../engine/backoff.js';
import { Http1Client, type Http1Exchange } from './http1-client.js';

export const RESPONSE_BODY_CAP_BYTES = 4 * 1024;
const ERROR_TEXT_CAP = 1024;

export interface SendRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface SendResult {
  ok: boolean;
  /** HTTP status, or null when no answer arrived (time-out, refused, TLS, blocked address). */
  status: number | null;
  /** Why the attempt failed, with the start of the answer's body for context; null on success. */
  error: string | null;
  retryAfterMs: number | null;
  durationMs: number;
}

/** The result of an attempt that never reached the subscriber: `error` says why. */
export function notSent(error: string): SendResult {
  return { ok: false, status: null, error, retryAfterMs: null, durationMs: 0 };
}

/** What the worker needs of a sender: a Sender, or a SenderThread (the same, in a thread of its own). */
export interface Sending {
  /** Resolves once attempts can go. */
  start(): Promise<void>;
  send(req: SendRequest): Promise<SendResult>;
  abortAll(): void;
  close(): Promise<void>;
}

export interface SenderOptions {
  timeoutMs: number;
  allowPrivateNetworks: boolean;
  /** Connections kept per subscriber origin. */
  connectionsPerOrigin?: number;
  /** PEM certificates of CAs trusted besides Node's default roots (HOOKLINE_CA_FILE). */
  extraCaCertificates?: string | null;
}

/** Node's names for certificate verification failures, and its TLS and OpenSSL error codes. */
const TLS_ERROR =
  /^(ERR_TLS_|ERR_SSL_)|CERT|CRL|^UNABLE_TO_|^(INVALID_CA|INVALID_PURPOSE|PATH_LENGTH_EXCEEDED|HOSTNAME_MISMATCH)$/;

function describe(err: unknown, timeoutMs: number): string {
  const e = err as {
    name?: string;
    code?: string;
    message?: string;
    cause?: { code?: string; message?: string };
  };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return `timed out after ${timeoutMs} ms`;
  const inner = e.cause ?? e;
  const code = inner.code ?? e.code;
  const message = inner.message ?? e.message;
  if (code && TLS_ERROR.test(code)) return `TLS: ${message} (${code})`;
  return code ? `${code}: ${message}` : (e.message ?? String(err));
}

/** A deadline in the queue; `expire` is dropped (null) once the attempt has ended. */
interface Deadline {
  at: number;
  expire: (() => void) | null;
}

/** Ends attempts at their deadline. Every attempt gets the same time-out, so deadlines come due in the
 * order attempts started: a FIFO with one timer replaces a timer (and abort signal) per attempt. */
class Deadlines {
  private readonly queue: Deadline[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | null = null;

  add(at: number, expire: () => void): Deadline {
    const entry: Deadline = { at, expire };
    this.queue.push(entry);
    if (!this.timer) this.arm();
    return entry;
  }

  /**
   * An attempt ended before its deadline. Its entry stays queued until the deadline comes round, so
   * what it held (the attempt's closures, its answer) is let go now: at thousands of attempts a second
   * and a 15 s time-out, keeping them was tens of thousands of finished attempts alive, most of the
   * worker's memory (bench/RESULTS.md, "Memory").
   */
  static clear(entry: Deadline): void {
    entry.expire = null;
  }

  private arm(): void {
    while (this.head < this.queue.length && this.queue[this.head]!.expire === null) this.head++;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    const next = this.queue[this.head];
    if (!next) return;
    this.timer = setTimeout(() => this.fire(), Math.max(0, next.at - performance.now()));
    this.timer.unref();
  }

  private fire(): void {
    this.timer = null;
    const now = performance.now();
    while (this.head < this.queue.length && this.queue[this.head]!.at <= now) {
      this.queue[this.head++]!.expire?.();
    }
    this.arm();
  }

  /** Expires everything now (shutdown). */
  expireAll(): void {
    for (const entry of this.queue.splice(0)) entry.expire?.();
    this.head = 0;
  }
}

class TimedOut extends Error {}

/** How long a connection to a subscriber is kept open unused. */
const IDLE_CONNECTION_MS = 30_000;

export class Sender implements Sending {
  private readonly client: Http1Client;
  private readonly deadlines = new Deadlines();

  constructor(private readonly options: SenderOptions) {
    this.client = new Http1Client({
      connectionsPerOrigin: options.connectionsPerOrigin ?? 16,
      idleTimeoutMs: IDLE_CONNECTION_MS,
      lookup: createGuardedLookup(options.allowPrivateNetworks),
      // A `ca` replaces Node's roots, so they are passed along with the extra ones.
      ...(options.extraCaCertificates ? { ca: [...rootCertificates, options.extraCaCertificates] } : {}),
    });
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * One attempt: a POST, its answer's status, Retry-After and the start of its body. No per-attempt
   * timer or abort signal: the attempt's deadline is an entry in one FIFO (docs/architecture.md,
   * "Sending").
   */
  send(req: SendRequest, cancel?: AbortSignal, now: () => number = Date.now): Promise<SendResult> {
    const started = performance.now();
    const { timeoutMs, allowPrivateNetworks } = this.options;
    return new Promise<SendResult>((resolve) => {
      let exchange: Http1Exchange | null = null;
      let settled = false;
      const finish = (partial: Omit<SendResult, 'durationMs'>) => {
        if (settled) return;
        settled = true;
        Deadlines.clear(deadline);
        cancel?.removeEventListener('abort', onCancel);
        // Not `{ ...partial, durationMs }`: that made a new hidden class for every attempt (V8's
        // --log-maps), so every read of a result was megamorphic (bench/RESULTS.md, "Session of run W").
        const { ok, status, error, retryAfterMs } = partial;
        resolve({ ok, status, error, retryAfterMs, durationMs: performance.now() - started });
      };
      const failed = (error: string) => finish({ ok: false, status: null, error, retryAfterMs: null });
      const deadline = this.deadlines.add(started + timeoutMs, () => {
        failed(`timed out after ${timeoutMs} ms`);
        exchange?.abort(new TimedOut());
      });
      const onCancel = () => {
        failed('attempt cancelled');
        exchange?.abort(new Error('attempt cancelled'));
      };
      if (cancel?.aborted) return onCancel();
      cancel?.addEventListener('abort', onCancel, { once: true });
      try {
        const url = new URL(req.url);
        // Node does not run `lookup` for IP literals, so those are checked here.
        if (!allowPrivateNetworks) assertHostAllowed(url.hostname);
        exchange = this.client.post(url, req.headers, req.body, RESPONSE_BODY_CAP_BYTES, (err, answer) => {
          if (err) return failed(describe(err, timeoutMs));
          const status = answer!.status;
          if (status >= 200 && status < 300)
            return finish({ ok: true, status, error: null, retryAfterMs: null });
          const text = answer!.body.toString('utf8');
          const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
          finish({
            ok: false,
            status,
            error: `HTTP ${status}${redirect}${text ? `: ${text.slice(0, ERROR_TEXT_CAP)}` : ''}`,
            retryAfterMs:
              status === 429 || status === 503 ? parseRetryAfter(answer!.retryAfter, now()) : null,
          });
        });
      } catch (err) {
        return failed(describe(err, timeoutMs));
      }
    });
  }

  /** Ends every attempt in flight at once (their results say they timed out). */
  abortAll(): void {
    this.deadlines.expireAll();
  }

  close(): Promise<void> {
    this.deadlines.expireAll();
    this.client.close();
    return Promise.resolve();
  }
}
