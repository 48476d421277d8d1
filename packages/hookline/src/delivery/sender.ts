// The webhook HTTP client. It protects hookline from its subscribers: private addresses are refused
// inside DNS resolution (so it connects only to the address it checked), redirects are not followed,
// the whole attempt has one deadline, and at most a few KiB of any answer is read.
import { createRequire } from 'node:module';
import { rootCertificates } from 'node:tls';
import type { Agent as AgentType, Dispatcher } from 'undici';
import { assertHostAllowed, createGuardedLookup } from '../net/index.js';
import { parseRetryAfter } from './backoff.js';

/**
 * undici's Agent alone. The package's entry point loads all of undici (fetch, WebSocket, caches,
 * mocks): ~130 ms of every worker's start, of ~250 ms, where the Agent takes ~30. Loaded by the first
 * Sender, so a worker's main thread, whose attempts go from its sender thread, loads none of undici.
 * The same class as the package exports (test/delivery/sender.test.ts checks it, so an upgrade that
 * moves it fails there).
 */
export function undiciAgent(): typeof AgentType {
  loadedAgent ??= createRequire(import.meta.url)('undici/lib/dispatcher/agent.js') as typeof AgentType;
  return loadedAgent;
}
let loadedAgent: typeof AgentType | undefined;
type Agent = AgentType;

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
class BodyCapReached extends Error {}

export class Sender implements Sending {
  private readonly agent: Agent;
  private readonly deadlines = new Deadlines();

  constructor(private readonly options: SenderOptions) {
    this.agent = new (undiciAgent())({
      keepAliveTimeout: 30_000,
      connections: options.connectionsPerOrigin ?? 16,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: {
        timeout: options.timeoutMs,
        lookup: createGuardedLookup(options.allowPrivateNetworks),
        // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED=0 in the environment cannot turn certificate
        // checks off; no endpoint setting can either (docs/security.md).
        rejectUnauthorized: true,
        // A `ca` replaces Node's roots, so they are passed along with the extra ones.
        ...(options.extraCaCertificates ? { ca: [...rootCertificates, options.extraCaCertificates] } : {}),
      },
    });
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * One attempt: a POST through undici's dispatcher with a minimal handler (no response stream, no
   * per-attempt timer or abort signal: docs/architecture.md, "Sending").
   */
  send(req: SendRequest, cancel?: AbortSignal, now: () => number = Date.now): Promise<SendResult> {
    const started = performance.now();
    const { timeoutMs, allowPrivateNetworks } = this.options;
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      let controller: Dispatcher.DispatchController | null = null;
      let status = 0;
      let retryAfter: string | string[] | undefined;
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = (partial: Omit<SendResult, 'durationMs'>) => {
        if (settled) return;
        settled = true;
        Deadlines.clear(deadline);
        cancel?.removeEventListener('abort', onCancel);
        resolve({ ...partial, durationMs: performance.now() - started });
      };
      const failed = (error: string) => finish({ ok: false, status: null, error, retryAfterMs: null });
      const answered = () => {
        const text = Buffer.concat(chunks).subarray(0, RESPONSE_BODY_CAP_BYTES).toString('utf8');
        if (status >= 200 && status < 300)
          return finish({ ok: true, status, error: null, retryAfterMs: null });
        const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
        finish({
          ok: false,
          status,
          error: `HTTP ${status}${redirect}${text ? `: ${text.slice(0, ERROR_TEXT_CAP)}` : ''}`,
          retryAfterMs:
            status === 429 || status === 503
              ? parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, now())
              : null,
        });
      };
      const stop = (reason: Error) => {
        if (controller && !controller.aborted) controller.abort(reason);
      };
      const deadline = this.deadlines.add(started + timeoutMs, () => {
        failed(`timed out after ${timeoutMs} ms`);
        stop(new TimedOut());
      });
      const onCancel = () => {
        failed('attempt cancelled');
        stop(new Error('attempt cancelled'));
      };
      if (cancel?.aborted) return onCancel();
      cancel?.addEventListener('abort', onCancel, { once: true });
      let url: URL;
      try {
        url = new URL(req.url);
        // Node does not run `lookup` for IP literals, so those are checked here.
        if (!allowPrivateNetworks) assertHostAllowed(url.hostname);
      } catch (err) {
        return failed(describe(err, timeoutMs));
      }
      this.agent.dispatch(
        {
          origin: url.origin,
          path: `${url.pathname}${url.search}`,
          method: 'POST',
          headers: req.headers,
          body: req.body,
        },
        {
          onRequestStart: (c) => {
            controller = c;
            if (settled) c.abort(new Error('attempt already ended'));
          },
          onResponseStart: (_c, statusCode, headers) => {
            status = statusCode;
            retryAfter = headers['retry-after'];
          },
          onResponseData: (c, chunk) => {
            chunks.push(chunk);
            size += chunk.length;
            // Enough of the answer: the rest of a huge one is never read.
            if (size >= RESPONSE_BODY_CAP_BYTES) c.abort(new BodyCapReached());
          },
          onResponseEnd: () => answered(),
          onResponseError: (_c, err) => {
            if (err instanceof BodyCapReached) answered();
            else failed(describe(err, timeoutMs));
          },
        },
      );
    });
  }

  /** Ends every attempt in flight at once (their results say they timed out). */
  abortAll(): void {
    this.deadlines.expireAll();
  }

  async close(): Promise<void> {
    this.deadlines.expireAll();
    await this.agent.close();
  }
}
