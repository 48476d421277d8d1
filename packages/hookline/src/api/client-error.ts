// Answers for requests node:http refuses before any route sees them (a request line and headers
// over 16 KiB, bytes that are not HTTP, a request that took too long), in the one error shape of
// docs/contract.md §4. Plain node:http, no framework: the worker's health server uses it too.
import type { Duplex } from 'node:stream';
import type { ErrorCode } from '../errors.js';

/** How long a refused connection may keep sending before it is cut. */
const LINGER_MS = 2000;

const answered = new WeakSet<Duplex>();

function answerFor(err: NodeJS.ErrnoException): [number, string, ErrorCode, string] {
  switch (err.code) {
    case 'HPE_HEADER_OVERFLOW':
      return [
        431,
        'Request Header Fields Too Large',
        'headers_too_large',
        'the request line and headers are larger than 16 KiB (is the URL that long?)',
      ];
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return [408, 'Request Timeout', 'request_timeout', 'the request was not received in time'];
    default:
      return [400, 'Bad Request', 'bad_request', 'the request is not well-formed HTTP/1.1'];
  }
}

/**
 * The http server's 'clientError' listener. Writes the answer, then ends the connection gracefully:
 * `end()` after the write, reading on until the client closes or LINGER_MS passes, because closing
 * at once with unread bytes makes the kernel reset the connection, and the client may lose the
 * answer it was about to read.
 */
export function onClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  // A reset connection has nobody to answer; node's parser reports every later chunk again.
  if (err.code === 'ECONNRESET' || socket.destroyed || answered.has(socket)) return;
  answered.add(socket);
  // An answer already under way on this connection must not be corrupted by another one.
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (!socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, reason, code, message] = answerFor(err);
  const body = JSON.stringify({ error: { code, message } });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.on('end', () => socket.destroy());
  socket.resume();
}
