import type { IncomingMessage, ServerResponse } from 'node:http';
import { MemoryDedupeStore, type DedupeStore } from './dedupe-store.js';
import { WebhookVerificationError } from './errors.js';
import { readRawBody } from './raw-body.js';
import { prepareKeys, verifyWithKeys, type VerificationKeys, type WebhookEvent } from './verify.js';

/** `secret` (v1) or `publicKey` (v1a), exactly one, as for {@link verifyWebhook}; then the options. */
export interface WebhookHandlerOptions extends VerificationKeys {
  /** Your code. Throwing (or rejecting) answers 500, so the sender retries the same hook-id later. */
  onEvent: (event: WebhookEvent, req: IncomingMessage) => unknown;
  /** Where processed hook-ids are remembered. Default: a {@link MemoryDedupeStore} (one process). */
  store?: DedupeStore;
  /** Allowed clock skew in seconds. Default 300. */
  toleranceSeconds?: number;
  /** Larger bodies are answered 413 without being buffered. Default 1 MiB. */
  maxBodyBytes?: number;
  /** Unexpected failures (onEvent or store errors). Default `console.error`; never sent to the client. */
  onError?: (error: unknown, req: IncomingMessage) => void;
}

/** Error codes the handler sends besides the {@link WebhookVerificationError} reasons. */
export type WebhookHandlerErrorCode =
  | 'method_not_allowed'
  | 'payload_too_large'
  | 'raw_body_required'
  | 'in_progress'
  | 'handler_failed'
  | 'internal_error';

const MIB = 1024 * 1024;

function send(res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.writableEnded) return;
  const json = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(json)),
  });
  res.end(json);
}

function sendError(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  send(res, status, { error: { code, message } }, headers);
}

/**
 * A request handler for plain `node:http`, Express or Fastify (`reply.hijack()` then pass
 * `request.raw`, `reply.raw`, with a content-type parser that leaves the body unread or stores the raw
 * Buffer on `request.raw.body`). It verifies, answers 400 on an invalid delivery, deduplicates by
 * hook-id, and acknowledges with 200 only after `onEvent` resolved.
 *
 * Guarantee: `onEvent` runs to success at most once per hook-id (per store). A failed run releases the
 * claim so the sender's retry runs it again; a duplicate of an acknowledged delivery answers
 * `200 {"duplicate": true}` without calling it; a duplicate arriving mid-run answers 409 to be retried.
 * The returned promise never rejects.
 */
export function createWebhookHandler(
  options: WebhookHandlerOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const { onEvent, toleranceSeconds, maxBodyBytes = MIB } = options;
  const store = options.store ?? new MemoryDedupeStore();
  const onError = options.onError ?? ((error: unknown) => console.error('[hookline] webhook handler', error));
  // Fail at start-up, not on the first delivery: a bad key would reject every request.
  const keys = prepareKeys(options);

  async function handleVerified(
    event: WebhookEvent,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const claim = await store.claim(event.id);
    if (claim === 'completed') return send(res, 200, { duplicate: true });
    if (claim === 'in_progress') {
      return sendError(res, 409, 'in_progress', 'This hook-id is being processed; retry later');
    }
    try {
      await onEvent(event, req);
    } catch (error) {
      onError(error, req);
      await store.release(event.id);
      return sendError(res, 500, 'handler_failed', 'The webhook handler failed; retry later');
    }
    try {
      await store.complete(event.id);
    } catch (error) {
      // The event was handled; acknowledging avoids running it twice. At worst the id stays claimed.
      onError(error, req);
    }
    send(res, 200, { received: true });
  }

  return async (req, res) => {
    try {
      if (req.method !== 'POST') {
        return sendError(res, 405, 'method_not_allowed', 'Webhooks are delivered with POST', {
          allow: 'POST',
        });
      }
      const raw = await readRawBody(req, maxBodyBytes);
      if (!raw.ok) {
        if (raw.problem === 'too_large') {
          const message = `The body exceeds ${maxBodyBytes} bytes`;
          return sendError(res, 413, 'payload_too_large', message, { connection: 'close' });
        }
        onError(new Error(`webhook raw body unavailable: ${raw.problem}`), req);
        return sendError(
          res,
          500,
          'raw_body_required',
          'The webhook handler needs the raw request body: do not parse it as JSON before this handler ' +
            '(with Express, use express.raw({ type: "application/json" }) on this route)',
        );
      }
      let event: WebhookEvent;
      try {
        event = verifyWithKeys(keys, { headers: req.headers, body: raw.body, toleranceSeconds });
      } catch (error) {
        if (!(error instanceof WebhookVerificationError)) throw error;
        return sendError(res, 400, error.reason, error.message);
      }
      await handleVerified(event, req, res);
    } catch (error) {
      onError(error, req);
      sendError(res, 500, 'internal_error', 'Internal error');
    }
  };
}
