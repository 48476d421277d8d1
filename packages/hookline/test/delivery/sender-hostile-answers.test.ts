// Attempts (delivery/sender.ts) against subscribers that answer badly, on 127.0.0.1: a scripted TCP
// server that writes exact bytes (framings, interim answers, malformed answers, connections closed at
// awkward moments), and node:http for the per-origin connection limit. Whatever the bytes, an attempt
// ends as a clean failure whose reason holds nothing the subscriber wrote (docs/security.md, "What is
// stored"), and the next attempt gets a connection that works.
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_HEAD_BYTES, Sender, type SenderOptions } from '../../src/delivery/sender.js';
/** A request as the scripted server read it. */
interface Seen {
  head: string;
  body: string;
  /** 1-based number of the connection it came on, and its number on that connection. */
  connection: number;
  onConnection: number;
}

type Script = (socket: Socket, seen: Seen) => void;

/** A TCP server that reads each request (head and Content-Length body) and lets `script` answer. */
async function scripted(script: Script) {
  const requests: Seen[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const connection = ++connections;
    let onConnection = 0;
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.toString('latin1', 0, end);
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        const seen = {
          head,
          body: buf.toString('utf8', end + 4, end + 4 + length),
          connection,
          onConnection: ++onConnection,
        };
        buf = buf.subarray(end + 4 + length);
        requests.push(seen);
        script(socket, seen);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const s = {
    url: new URL(`http://127.0.0.1:${port}/hook?x=1`),
    requests,
    get connections() {
      return connections;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  cleanups.push(s.close);
  return s;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function sender(options: Partial<SenderOptions> = {}) {
  const s = new Sender({
    timeoutMs: 10_000,
    allowPrivateNetworks: true,
    connectionsPerOrigin: 8,
    ...options,
  });
  cleanups.push(() => s.close());
  return s;
}

const HEADERS = { 'content-type': 'application/json', 'hook-id': 'msg_1' };
const BODY = '{"type":"user.created","data":{"id":"user_1","name":"Zoë"}}';
/** Text a hostile subscriber echoes where hookline might copy it: it must never be in a reason. */
const ECHO = 'ECHOED_PAYLOAD_user_1';

const post = (s: Sender, url: URL, body = BODY) => s.send({ url: url.href, headers: HEADERS, body });

/** Writes `bytes` one small piece at a time, so the answer arrives split everywhere. */
function trickle(socket: Socket, bytes: string, then?: () => void) {
  const pieces = bytes.match(/[\s\S]{1,3}/g) ?? [];
  const next = () => {
    const piece = pieces.shift();
    if (piece === undefined) return then?.();
    socket.write(piece, 'latin1', () => setImmediate(next));
  };
  next();
}

describe('attempts against hostile answers', () => {
  it('sends one POST with the body, its length and the host, and reuses connections', async () => {
    const server = await scripted((socket) => socket.write('HTTP/1.1 204 No Content\r\n\r\n'));
    const s = sender();
    for (let i = 0; i < 10; i++) expect(await post(s, server.url)).toMatchObject({ ok: true, status: 204 });
    // undici may open a second one while the first is being handed back; never one per attempt.
    expect(server.connections).toBeLessThanOrEqual(2);
    const [first] = server.requests;
    expect(first!.head.split('\r\n')[0]).toBe('POST /hook?x=1 HTTP/1.1');
    expect(first!.head).toMatch(new RegExp(`\r\nhost: 127.0.0.1:${server.url.port}(\r\n|$)`, 'i'));
    expect(first!.head).toMatch(new RegExp(`\r\ncontent-length: ${Buffer.byteLength(BODY)}(\r\n|$)`, 'i'));
    expect(first!.head).toContain('\r\nhook-id: msg_1');
    expect(first!.body).toBe(BODY);
  });

  it('reads a chunked answer split into pieces, with extensions and trailers, and keeps the connection', async () => {
    const answer =
      'HTTP/1.1 503 Service Unavailable\r\ntransfer-encoding: chunked\r\nretry-after: 7\r\n\r\n' +
      '5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n';
    const server = await scripted((socket) => trickle(socket, answer));
    const s = sender();
    const expected = { ok: false, status: 503, error: 'HTTP 503: hello world', retryAfterMs: 7000 };
    for (let i = 0; i < 4; i++) expect(await post(s, server.url)).toMatchObject(expected);
    expect(server.connections).toBeLessThanOrEqual(2);
  });

  it('skips interim 103 answers; a 100 Continue nobody asked for fails the attempt', async () => {
    const final = 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok';
    const hints = await scripted((socket) =>
      socket.write(`HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n${final}`),
    );
    expect(await post(sender(), hints.url)).toMatchObject({ ok: true, status: 200 });
    const unasked = await scripted((socket) => socket.write(`HTTP/1.1 100 Continue\r\n\r\n${final}`));
    expect(await post(sender(), unasked.url)).toMatchObject({ ok: false, status: null });
  });

  it('reads an answer without a length until the connection closes, and opens a new one next time', async () => {
    const server = await scripted((socket) => socket.end('HTTP/1.0 500 Oops\r\n\r\nuntil close'));
    const s = sender();
    expect(await post(s, server.url)).toMatchObject({ status: 500, error: 'HTTP 500: until close' });
    expect(await post(s, server.url)).toMatchObject({ status: 500, error: 'HTTP 500: until close' });
    expect(server.connections).toBe(2);
  });

  it('does not reuse a connection the answer says to close', async () => {
    const server = await scripted((socket) =>
      socket.write('HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n'),
    );
    const s = sender();
    for (let i = 0; i < 3; i++) expect((await post(s, server.url)).status).toBe(204);
    expect(server.connections).toBe(3);
  });

  it('keeps at most the body cap of a long answer and drops its connection', async () => {
    const server = await scripted((socket) =>
      socket.write(`HTTP/1.1 500 X\r\ncontent-length: 100000\r\n\r\n${'y'.repeat(100_000)}`),
    );
    const s = sender();
    const result = await post(s, server.url);
    expect(result.error).toMatch(/^HTTP 500: y+$/);
    expect(result.error!.length).toBeLessThanOrEqual('HTTP 500: '.length + 4096);
    await post(s, server.url);
    const [first, second] = server.requests;
    expect(second!.connection).not.toBe(first!.connection);
  });

  it.each([
    ['a status line that is the payload echoed', `${ECHO} ${BODY}\r\n\r\n`],
    ['a status line that is not HTTP/1.x', `HTTP/2 200 ${ECHO}\r\n\r\n`],
    ['a status code out of range', `HTTP/1.1 2000 ${ECHO}\r\ncontent-length: 0\r\n\r\n`],
    ['conflicting lengths', `HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nx`],
    ['a bad length', `HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n`],
    ['a bad chunk size', `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${ECHO}\r\n`],
    ['a header line without a colon', `HTTP/1.1 200 OK\r\n${ECHO}\r\n\r\n`],
    ['a header value with a control byte', `HTTP/1.1 200 OK\r\nx-echo: ${ECHO}\x01\r\n\r\n`],
    ['an upgrade', `HTTP/1.1 101 ${ECHO}\r\nupgrade: ${ECHO}\r\nconnection: upgrade\r\n\r\n`],
    ['a head larger than allowed', `HTTP/1.1 200 OK\r\nx-echo: ${ECHO}${'a'.repeat(MAX_HEAD_BYTES + 10)}`],
    ['a body shorter than its length', `HTTP/1.1 500 ${ECHO}\r\ncontent-length: 100\r\n\r\n${ECHO}`, true],
    ['a connection closed before any answer', '', true],
    ['a head cut off by a close', `HTTP/1.1 500 ${ECHO}\r\nx-echo: ${ECHO}`, true],
  ])(
    'fails cleanly on %s, says nothing the subscriber wrote, and the next attempt gets a new connection',
    async (_name, answer, close = false) => {
      let n = 0;
      const server = await scripted((socket) => {
        if (n++ > 0) return void socket.write('HTTP/1.1 204 No Content\r\n\r\n');
        if (close) socket.end(answer);
        else socket.write(answer);
      });
      const s = sender();
      const result = await post(s, server.url);
      expect(result).toMatchObject({ ok: false, status: null, retryAfterMs: null });
      expect(result.error).toMatch(
        /^(invalid HTTP answer|the subscriber closed|the answer's|request failed)/,
      );
      expect(result.error).not.toContain(ECHO);
      expect(result.error).not.toContain('user_1');
      expect(await post(s, server.url)).toMatchObject({ ok: true, status: 204 });
      expect(server.connections).toBe(2);
    },
  );

  it('a body trickled slower than the time-out fails at the time-out', async () => {
    const server = await scripted((socket) => {
      socket.write(`HTTP/1.1 500 X\r\ncontent-length: 1000\r\n\r\n${ECHO}`);
      const ticker = setInterval(() => socket.write('.'), 50);
      socket.on('close', () => clearInterval(ticker));
    });
    const result = await post(sender({ timeoutMs: 500 }), server.url);
    expect(result).toMatchObject({ ok: false, status: null, error: 'timed out after 500 ms' });
  });

  describe('with node:http', () => {
    let server: Server;
    let connections = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const serve = async () => {
      connections = inFlight = maxInFlight = 0;
      server = createHttpServer((req, res) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () =>
          setTimeout(() => {
            inFlight--;
            res.writeHead(500, { 'content-type': 'text/plain' }).end(Buffer.concat(chunks));
          }, 5),
        );
      });
      server.on('connection', () => connections++);
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
      cleanups.push(() => server.closeAllConnections());
      return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/echo`);
    };

    it('keeps to its connections per origin, queueing the rest, and each gets its own answer', async () => {
      const url = await serve();
      const s = sender({ connectionsPerOrigin: 3 });
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => post(s, url, `{"n":${i}}`).then((r) => r.error)),
      );
      expect(answers).toEqual(Array.from({ length: 30 }, (_, i) => `HTTP 500: {"n":${i}}`));
      expect(connections).toBe(3);
      expect(maxInFlight).toBe(3);
    });
  });
});
