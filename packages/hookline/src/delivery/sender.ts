// A webhook attempt, through undici (docs/architecture.md, "Sending"). It protects hookline from its
// subscribers: private addresses are refused inside DNS resolution (so it connects only to the address
// it checked), redirects are not followed, the whole attempt has one deadline, at most a few KiB of
// any answer is read, and nothing the subscriber wrote is put in the attempt's reason (only in the
// answer that engine/last-error.ts seals).
import { rootCertificates } from 'node:tls';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import {
  assertHostAllowed,
  BLOCKED_ADDRESS_ERROR_CODE,
  createGuardedLookup,
  EGRESS_PROXY_ERROR_CODE,
  egressProxyConnector,
  TLS_FAILURE_PREFIX,
} from '../net/index.js';
import { parseRetryAfter } from '../engine/backoff.js';

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
  /** HOOKLINE_EGRESS_PROXY_URL: every connection tunnels through this CONNECT proxy (net/egress-proxy.ts). */
  egressProxyUrl?: string | null;
}

/** Node's names for certificate verification failures, and its TLS and OpenSSL error codes. */
const TLS_ERROR =
  /^(ERR_TLS_|ERR_SSL_)|CERT|CRL|^UNABLE_TO_|^(INVALID_CA|INVALID_PURPOSE|PATH_LENGTH_EXCEEDED|HOSTNAME_MISMATCH)$/;
/** A code hookline may repeat: a constant's name, never text from the other side. */
const CODE = /^[A-Z][A-Z0-9_]{1,63}$/;

/** undici's names for what went wrong in an answer, in hookline's words. */
const ANSWER_ERRORS: Readonly<Record<string, string>> = {
  UND_ERR_SOCKET: 'the subscriber closed the connection',
  UND_ERR_HEADERS_OVERFLOW: "the answer's head is too large",
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: "the answer's body does not match its Content-Length",
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
  UND_ERR_HEADERS_TIMEOUT: 'no answer in time',
  UND_ERR_BODY_TIMEOUT: "the answer's body stopped",
};

/**
 * Why an attempt failed, in hookline's own words: an error class and a code, never bytes the
 * subscriber sent (a malformed status line, a header, a certificate's names), which would be stored in
 * clear (docs/security.md, "Encryption at rest"). Node's messages for connection errors and OpenSSL's for
 * TLS are fixed text about our side, so they stay; the one TLS message that quotes the certificate
 * (its names) is replaced.
 */
export function describeFailure(err: unknown, hostname: string): string {
  const e = err as {
    name?: unknown;
    code?: unknown;
    message?: unknown;
    cause?: { code?: unknown; message?: unknown };
  };
  const inner = e.cause && typeof e.cause === 'object' ? e.cause : e;
  const rawCode = inner.code ?? e.code;
  const code = typeof rawCode === 'string' && CODE.test(rawCode) ? rawCode : null;
  const message = String(inner.message ?? e.message ?? '');
  if (code === BLOCKED_ADDRESS_ERROR_CODE) return `${code}: ${message}`;
  if (code === EGRESS_PROXY_ERROR_CODE) return message;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return `${TLS_FAILURE_PREFIX}the certificate is not for ${hostname} (${code})`;
  if (code && TLS_ERROR.test(code)) return `${TLS_FAILURE_PREFIX}${message} (${code})`;
  if (code?.startsWith('HPE_')) return `invalid HTTP answer (${code})`;
  if (e.name === 'HTTPParserError') {
    // llhttp's reason, fixed text of its own (the bytes it choked on are in `data`, left there).
    const why = /\(([\w ,./'-]{1,100})\)$/.exec(message)?.[1];
    return `invalid HTTP answer${why ? ` (${why})` : ''}`;
  }
  if (code && ANSWER_ERRORS[code]) return `${ANSWER_ERRORS[code]} (${code})`;
  // Node's system errors (ECONNREFUSED, ENOTFOUND…): "connect ECONNREFUSED 127.0.0.1:8080".
  if (code && /^E[A-Z]+$/.test(code) && (inner as { syscall?: unknown }).syscall !== undefined)
    return `${code}: ${message}`;
  return `request failed (${code ?? 'no error code'})`;
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
class Cancelled extends Error {}
class BodyCapReached extends Error {}

/** How long a connection to a subscriber is kept open unused. */
const IDLE_CONNECTION_MS = 30_000;
/** The largest answer head (status line and headers) read. */
export const MAX_HEAD_BYTES = 16 * 1024;

export class Sender implements Sending {
  private readonly agent: Agent;
  private readonly deadlines = new Deadlines();

  constructor(private readonly options: SenderOptions) {
    const lookup = createGuardedLookup(options.allowPrivateNetworks);
    const direct = buildConnector({
      timeout: options.timeoutMs,
      lookup,
      // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED=0 cannot turn certificate checks off
      // (docs/security.md).
      rejectUnauthorized: true,
      // A `ca` replaces Node's roots, so they are passed along with the extra ones.
      ...(options.extraCaCertificates ? { ca: [...rootCertificates, options.extraCaCertificates] } : {}),
    });
    const connect = options.egressProxyUrl
      ? egressProxyConnector({
          proxyUrl: options.egressProxyUrl,
          lookup,
          allowPrivateNetworks: options.allowPrivateNetworks,
          timeoutMs: options.timeoutMs,
          tlsOverTunnel: direct,
        })
      : direct;
    this.agent = new Agent({
      connections: options.connectionsPerOrigin ?? 16,
      keepAliveTimeout: IDLE_CONNECTION_MS,
      keepAliveMaxTimeout: IDLE_CONNECTION_MS,
      maxHeaderSize: MAX_HEAD_BYTES,
      // The attempt's own deadline ends it; these only must not end it sooner.
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect,
    });
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * One attempt: a POST through undici's dispatcher with a minimal handler (no response stream, no
   * per-attempt timer or abort signal: its deadline is an entry in one FIFO, docs/architecture.md,
   * "Sending").
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
      let hostname = '';
      const finish = (partial: Omit<SendResult, 'durationMs'>) => {
        if (settled) return;
        settled = true;
        Deadlines.clear(deadline);
        cancel?.removeEventListener('abort', onCancel);
        // Not `{ ...partial, durationMs }`: that made a new hidden class for every attempt (V8's
        // --log-maps), so every read of a result was megamorphic (bench/HISTORY.md, "Session of run W").
        const { ok, status, error, retryAfterMs } = partial;
        resolve({ ok, status, error, retryAfterMs, durationMs: performance.now() - started });
      };
      const failed = (error: string) => finish({ ok: false, status: null, error, retryAfterMs: null });
      const answered = () => {
        if (status >= 200 && status < 300)
          return finish({ ok: true, status, error: null, retryAfterMs: null });
        // The body is the subscriber's: after "HTTP <status>: ", where splitError finds and seals it.
        const text = Buffer.concat(chunks).subarray(0, RESPONSE_BODY_CAP_BYTES).toString('utf8');
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
        stop(new Cancelled());
      };
      if (cancel?.aborted) return onCancel();
      cancel?.addEventListener('abort', onCancel, { once: true });
      let url: URL;
      try {
        url = new URL(req.url);
        hostname = url.hostname;
        // Node does not run `lookup` for IP literals, so those are checked here.
        if (!allowPrivateNetworks) assertHostAllowed(url.hostname);
      } catch (err) {
        return failed(describeFailure(err, hostname));
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
            if (settled) c.abort(new Cancelled());
          },
          onResponseStart: (_c, statusCode, headers) => {
            status = statusCode;
            retryAfter = headers['retry-after'];
          },
          onResponseData: (c, chunk) => {
            chunks.push(chunk);
            size += chunk.length;
            // Enough of the answer: the rest of a huge one is never read (its connection is closed).
            if (size >= RESPONSE_BODY_CAP_BYTES) c.abort(new BodyCapReached());
          },
          onResponseEnd: () => answered(),
          onResponseError: (_c, err) => {
            if (err instanceof BodyCapReached) answered();
            else failed(describeFailure(err, hostname));
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
    await this.agent.destroy();
  }
}
