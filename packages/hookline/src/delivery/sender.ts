// The webhook HTTP client. It protects hookline from its subscribers: private addresses are refused
// inside DNS resolution (so it connects only to the address it checked), redirects are not followed,
// the whole attempt has one deadline, and at most a few KiB of any answer is read.
import { Agent, request, type Dispatcher } from 'undici';
import { assertHostAllowed, createGuardedLookup } from '../net/index.js';
import { parseRetryAfter } from './backoff.js';

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

export interface SenderOptions {
  timeoutMs: number;
  allowPrivateNetworks: boolean;
  /** Connections kept per subscriber origin. */
  connectionsPerOrigin?: number;
}

async function readCapped(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    chunks.push(buf);
    size += buf.length;
    if (size >= RESPONSE_BODY_CAP_BYTES) break;
  }
  // Leaving the loop early destroys the stream: the rest of a huge answer is never read.
  return Buffer.concat(chunks).subarray(0, RESPONSE_BODY_CAP_BYTES).toString('utf8');
}

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
  return code ? `${code}: ${inner.message ?? e.message}` : (e.message ?? String(err));
}

export class Sender {
  private readonly agent: Agent;

  constructor(private readonly options: SenderOptions) {
    this.agent = new Agent({
      keepAliveTimeout: 30_000,
      connections: options.connectionsPerOrigin ?? 16,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      connect: { timeout: options.timeoutMs, lookup: createGuardedLookup(options.allowPrivateNetworks) },
    });
  }

  async send(req: SendRequest, cancel?: AbortSignal, now: () => number = Date.now): Promise<SendResult> {
    const started = performance.now();
    const finish = (partial: Omit<SendResult, 'durationMs'>): SendResult => ({
      ...partial,
      durationMs: performance.now() - started,
    });
    try {
      const url = new URL(req.url);
      // Node does not run `lookup` for IP literals, so those are checked here.
      if (!this.options.allowPrivateNetworks) assertHostAllowed(url.hostname);
      const response = await request(url, {
        method: 'POST',
        headers: req.headers,
        body: req.body,
        dispatcher: this.agent,
        signal: cancel
          ? AbortSignal.any([AbortSignal.timeout(this.options.timeoutMs), cancel])
          : AbortSignal.timeout(this.options.timeoutMs),
      });
      const text = await readCapped(response.body);
      const status = response.statusCode;
      if (status >= 200 && status < 300) return finish({ ok: true, status, error: null, retryAfterMs: null });
      const retryAfter = response.headers['retry-after'];
      const redirect = status >= 300 && status < 400 ? ' (redirects are not followed)' : '';
      return finish({
        ok: false,
        status,
        error: `HTTP ${status}${redirect}${text ? `: ${text.slice(0, ERROR_TEXT_CAP)}` : ''}`,
        retryAfterMs:
          status === 429 || status === 503
            ? parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, now())
            : null,
      });
    } catch (err) {
      return finish({
        ok: false,
        status: null,
        error: describe(err, this.options.timeoutMs),
        retryAfterMs: null,
      });
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
