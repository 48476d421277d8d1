import type { IncomingMessage } from 'node:http';
import type { RawBody } from './signature.js';

/** The raw body, or why it could not be obtained (the handler maps each problem to a status). */
export type RawBodyResult =
  | { ok: true; body: RawBody }
  | { ok: false; problem: 'too_large' | 'parsed_by_framework' | 'already_consumed' };

/**
 * The raw body of a request. Frameworks that buffered it (express.raw(), express.text()) leave it on
 * `req.body`; a parsed object there means a JSON parser ran first and the signed bytes are lost.
 */
export async function readRawBody(req: IncomingMessage, maxBytes: number): Promise<RawBodyResult> {
  const preRead = (req as IncomingMessage & { body?: unknown }).body;
  if (typeof preRead === 'string' || preRead instanceof Uint8Array) {
    const size = typeof preRead === 'string' ? Buffer.byteLength(preRead) : preRead.byteLength;
    return size > maxBytes ? { ok: false, problem: 'too_large' } : { ok: true, body: preRead };
  }
  if (preRead !== undefined && preRead !== null) return { ok: false, problem: 'parsed_by_framework' };
  // Waiting on an ended stream would hang forever (e.g. Fastify parsed the body into its own object).
  if (req.readableEnded) return { ok: false, problem: 'already_consumed' };

  // Refuse early on an honest Content-Length, before reading anything.
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) return { ok: false, problem: 'too_large' };

  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) return void chunks.push(chunk);
      cleanup();
      // Keep draining (and discarding) rather than destroying the socket, so the client can still
      // read the 413; the handler closes the connection after answering.
      req.resume();
      resolve({ ok: false, problem: 'too_large' });
    };
    const onEnd = () => {
      cleanup();
      resolve({ ok: true, body: Buffer.concat(chunks, size) });
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const onClose = () => {
      cleanup();
      reject(new Error('The request was aborted before its body was received'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
