// Maps every error to the one JSON shape `{error: {code, message}}`. Unknown errors are a 500 with no
// detail for the client, logged with their stack for the operator.
import type { IncomingMessage } from 'node:http';
import type { ErrorObject } from 'ajv';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DecryptionError } from '../crypto/envelope.js';
import { HooklineError, errorBody } from '../errors.js';
import { isDatabaseUnavailable } from '../store/db.js';
import { validationMessage } from './validation-message.js';

/** Seconds a client is asked to wait before retrying a request the database could not serve. */
const DATABASE_RETRY_AFTER_S = 1;

function fromFastify(err: FastifyError): HooklineError | null {
  if (err.validation) {
    // docs/contract.md §4.1: every invalid `headers` value of an endpoint is invalid_headers.
    const inHeaders =
      err.validationContext === 'body' &&
      (err.validation as ErrorObject[]).every((e) => e.instancePath.startsWith('/headers'));
    return new HooklineError(
      inHeaders ? 'invalid_headers' : 'validation_failed',
      validationMessage(err.validationContext ?? 'request', err.validation as ErrorObject[]),
    );
  }
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new HooklineError('payload_too_large', 'request body is larger than 256 KiB');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new HooklineError('unsupported_media_type', 'send JSON with content-type: application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new HooklineError('invalid_json', 'request body is not valid JSON');
  }
  if (err instanceof SyntaxError) return new HooklineError('invalid_json', 'request body is not valid JSON');
  const status = err.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    return new HooklineError(status === 413 ? 'payload_too_large' : 'validation_failed', err.message);
  }
  return null;
}

/** The most of a refused body the server reads and throws away, so the client can read its 413. */
export const MAX_DRAINED_BODY_BYTES = 16 * 1024 * 1024;
/** How long it waits for that before it answers and closes anyway. */
const DRAIN_TIMEOUT_MS = 30_000;

/**
 * Reads the rest of a body that is too large and discards it; true when it ended within the bounds.
 * Answering while the client still sends and then closing makes the kernel reset the connection,
 * and node:http and undici clients then see EPIPE or ECONNRESET instead of the 413 (docs/errors.md).
 */
function drain(raw: IncomingMessage): Promise<boolean> {
  if (raw.complete) return Promise.resolve(true);
  // A client that went away, or announced more than the bound, is not waited for.
  if (raw.destroyed || Number(raw.headers['content-length']) > MAX_DRAINED_BODY_BYTES) {
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    let bytes = 0;
    const finish = (ended: boolean) => {
      clearTimeout(timer);
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('error', onFail);
      raw.off('close', onFail);
      resolve(ended);
    };
    const onData = (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > MAX_DRAINED_BODY_BYTES) finish(false);
    };
    const onEnd = () => finish(true);
    const onFail = () => finish(raw.complete);
    const timer = setTimeout(() => finish(false), DRAIN_TIMEOUT_MS);
    raw.on('data', onData);
    raw.once('end', onEnd);
    raw.once('error', onFail);
    raw.once('close', onFail);
    raw.resume();
  });
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler(async (err: FastifyError, request, reply) => {
    const known = err instanceof HooklineError ? err : fromFastify(err);
    if (known?.status === 413) {
      // Fastify asks to close the connection, as the client may still be sending; once the body
      // has been read to its end the connection is clean and can stay open.
      if (await drain(request.raw)) reply.removeHeader('connection');
      else reply.header('connection', 'close');
    }
    if (known) {
      return reply.status(known.status).send(errorBody(known.code, known.message));
    }
    if (isDatabaseUnavailable(err)) {
      // Not a bug and not the caller's fault: the database is busy or away for now (docs/errors.md).
      request.log.warn({ err }, 'database unavailable; answered 503');
      return reply
        .status(503)
        .header('retry-after', String(DATABASE_RETRY_AFTER_S))
        .send(errorBody('database_unavailable', 'the database is busy or unreachable; retry shortly'));
    }
    if (err instanceof DecryptionError) {
      request.log.error({ err }, 'stored data could not be decrypted (wrong HOOKLINE_ENCRYPTION_KEY?)');
    } else {
      request.log.error({ err }, 'unhandled error');
    }
    return reply
      .status(500)
      .send(errorBody('internal_error', 'internal error; the server log has the details'));
  });
  app.setNotFoundHandler((request, reply) =>
    reply
      .status(404)
      .send(errorBody('not_found', `no route for ${request.method} ${request.url.split('?')[0]}`)),
  );
}

/**
 * The router's own errors (a path segment that is not valid percent-encoding, or an id longer than
 * the router matches) never reach setErrorHandler; without this they answer in Fastify's shape.
 */
export function onFrameworkError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (err.code === 'FST_ERR_BAD_URL') {
    void reply.status(400).send(errorBody('invalid_id', 'an id in the path is not valid percent-encoding'));
  } else if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    // No id is that long, so it names nothing: the same answer as any unknown id.
    void reply.status(404).send(errorBody('not_found', 'no such resource: the id in the path is too long'));
  } else {
    request.log.error({ err }, 'router error');
    void reply
      .status(500)
      .send(errorBody('internal_error', 'internal error; the server log has the details'));
  }
}
