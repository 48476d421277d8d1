// The attempts' HTTP/1.1 client against real servers on 127.0.0.1: a scripted TCP server that writes
// exact bytes (framings, interim answers, malformed answers, connections closed at awkward moments),
// and node:http for keep-alive and the per-origin connection limit.
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Http1Client, MAX_HEAD_BYTES, type Http1Answer } from '../../src/delivery/http1-client.js';

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

function client(options: Partial<ConstructorParameters<typeof Http1Client>[0]> = {}) {
  const c = new Http1Client({ connectionsPerOrigin: 8, idleTimeoutMs: 30_000, ...options });
  cleanups.push(() => c.close());
  return c;
}

const HEADERS = { 'content-type': 'application/json', 'hook-id': 'msg_1' };
const BODY = '{"type":"user.created","data":{"id":"user_1","name":"Zoë"}}';

/** One POST; resolves with the answer, rejects with the connection's error. */
function post(
  c: Http1Client,
  url: URL,
  { cap = 4096, headers = HEADERS, body = BODY } = {},
): Promise<Http1Answer> {
  return new Promise((resolve, reject) => {
    c.post(url, headers, body, cap, (err, answer) => (err ? reject(err) : resolve(answer!)));
  });
}

const text = (a: Http1Answer) => a.body.toString('utf8');

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

describe('Http1Client', () => {
  it('sends one POST with the body, its length and the host, and reuses the connection', async () => {
    const server = await scripted((socket) => socket.write('HTTP/1.1 204 No Content\r\n\r\n'));
    const c = client();
    for (let i = 0; i < 5; i++) expect((await post(c, server.url)).status).toBe(204);
    expect(server.connections).toBe(1);
    const [first] = server.requests;
    expect(first!.head.split('\r\n')[0]).toBe('POST /hook?x=1 HTTP/1.1');
    expect(first!.head).toContain(`\r\nhost: 127.0.0.1:${server.url.port}\r\n`);
    expect(first!.head).toContain(`\r\ncontent-length: ${Buffer.byteLength(BODY)}\r\n`);
    expect(first!.head).toContain('\r\nhook-id: msg_1');
    expect(first!.body).toBe(BODY);
  });

  it('reads a chunked answer split into pieces, with extensions and trailers, and keeps the connection', async () => {
    const answer =
      'HTTP/1.1 500 Internal Server Error\r\ntransfer-encoding: chunked\r\nretry-after: 7\r\n\r\n' +
      '5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n';
    const server = await scripted((socket) => trickle(socket, answer));
    const c = client();
    const first = await post(c, server.url);
    expect(first.status).toBe(500);
    expect(first.retryAfter).toBe('7');
    expect(text(first)).toBe('hello world');
    expect(text(await post(c, server.url))).toBe('hello world');
    expect(server.connections).toBe(1);
  });

  it('skips interim 1xx answers', async () => {
    const server = await scripted((socket) =>
      socket.write(
        'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok',
      ),
    );
    const a = await post(client(), server.url);
    expect(a.status).toBe(200);
    expect(text(a)).toBe('ok');
  });

  it('reads an answer without a length until the connection closes, and opens a new one next time', async () => {
    const server = await scripted((socket) => socket.end('HTTP/1.0 200 OK\r\n\r\nuntil close'));
    const c = client();
    expect(text(await post(c, server.url))).toBe('until close');
    expect(text(await post(c, server.url))).toBe('until close');
    expect(server.connections).toBe(2);
  });

  it('does not reuse a connection the answer says to close, nor one with bytes after the answer', async () => {
    let n = 0;
    const server = await scripted((socket) =>
      socket.write(
        n++ % 2 === 0
          ? 'HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n'
          : 'HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\n\r\n',
      ),
    );
    const c = client();
    for (let i = 0; i < 4; i++) expect((await post(c, server.url)).status).toBe(204);
    expect(server.connections).toBe(4);
  });

  it('keeps at most RESPONSE cap bytes of a long answer and drops its connection', async () => {
    const server = await scripted((socket) =>
      socket.write(`HTTP/1.1 500 X\r\ncontent-length: 100000\r\n\r\n${'y'.repeat(100_000)}`),
    );
    const c = client();
    const a = await post(c, server.url, { cap: 10 });
    expect(text(a)).toBe('y'.repeat(10));
    await post(c, server.url, { cap: 10 });
    expect(server.connections).toBe(2);
  });

  it.each([
    ['a status line that is not HTTP/1.x', 'HTTP/2 200\r\n\r\n', /HPE_INVALID_STATUS/],
    ['garbage', 'hello there\r\n\r\n', /HPE_INVALID_STATUS/],
    [
      'conflicting lengths',
      'HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nx',
      /HPE_INVALID_CONTENT_LENGTH/,
    ],
    ['a bad length', 'HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n', /HPE_INVALID_CONTENT_LENGTH/],
    [
      'a bad chunk size',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      /HPE_INVALID_CHUNK_SIZE/,
    ],
    ['a header line without a colon', 'HTTP/1.1 200 OK\r\nnonsense\r\n\r\n', /HPE_INVALID_HEADER_TOKEN/],
    ['an upgrade', 'HTTP/1.1 101 Switching Protocols\r\n\r\n', /HPE_UNEXPECTED_UPGRADE/],
    ['a head without end', `HTTP/1.1 200 OK\r\nx: ${'a'.repeat(MAX_HEAD_BYTES + 10)}`, /HPE_HEADER_OVERFLOW/],
  ])('fails on %s, and the next attempt gets a new connection', async (_name, answer, error) => {
    let n = 0;
    const server = await scripted((socket) =>
      socket.write(n++ === 0 ? answer : 'HTTP/1.1 204 No Content\r\n\r\n'),
    );
    const c = client();
    await expect(post(c, server.url)).rejects.toMatchObject({ code: expect.stringMatching(error) });
    expect((await post(c, server.url)).status).toBe(204);
    expect(server.connections).toBe(2);
  });

  it('sends a request once more on a new connection when a reused one closes before any answer', async () => {
    // The first connection answers its first request and closes on its second, as a server whose
    // keep-alive time-out ends just as that request arrives.
    const server = await scripted((socket, seen) => {
      if (seen.connection === 1 && seen.onConnection === 2) socket.destroy();
      else socket.write('HTTP/1.1 204 No Content\r\n\r\n');
    });
    const c = client({ connectionsPerOrigin: 1 });
    await post(c, server.url);
    expect((await post(c, server.url)).status).toBe(204);
    // Sent again within its origin, which still holds the new connection.
    expect(c.originsInUse).toBe(1);
    expect(server.requests.map((r) => [r.connection, r.onConnection])).toEqual([
      [1, 1],
      [1, 2],
      [2, 1],
    ]);
  });

  it('fails, without sending again, when a new connection closes before answering', async () => {
    const server = await scripted((socket) => socket.destroy());
    await expect(post(client(), server.url)).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(server.requests).toHaveLength(1);
  });

  it('fails, without sending again, when a connection closes in the middle of an answer', async () => {
    const server = await scripted((socket, seen) => {
      if (seen.connection === 1 && seen.onConnection === 1) socket.write('HTTP/1.1 204 No Content\r\n\r\n');
      else socket.end('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc');
    });
    const c = client();
    await post(c, server.url);
    await expect(post(c, server.url)).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(server.requests).toHaveLength(2);
  });

  it('refuses header names and values that would break the request head', () => {
    const c = client();
    const url = new URL('http://127.0.0.1:1/');
    for (const headers of [{ 'x-a': 'one\r\nx-b: two' }, { 'x-a': 'a\nb' }, { 'x a': 'b' }, { 'x-a': 'é' }]) {
      expect(() => c.post(url, headers, '', 10, () => {})).toThrow(/invalid request header/);
    }
  });

  it('an aborted exchange ends at once with its error and its connection is not reused', async () => {
    const server = await scripted((socket, seen) => {
      if (seen.connection > 1) socket.write('HTTP/1.1 204 No Content\r\n\r\n');
    });
    const c = client();
    const outcome = new Promise<Error | null>((resolve) => {
      const exchange = c.post(server.url, HEADERS, BODY, 10, (err) => resolve(err));
      setTimeout(() => exchange.abort(new Error('stop')), 50);
    });
    expect((await outcome)?.message).toBe('stop');
    expect((await post(c, server.url)).status).toBe(204);
    expect(server.connections).toBe(2);
  });

  it('closes a connection left idle past its time-out', async () => {
    let closed = 0;
    const server = await scripted((socket) => {
      socket.on('close', () => closed++);
      socket.write('HTTP/1.1 204 No Content\r\n\r\n');
    });
    await post(client({ idleTimeoutMs: 50 }), server.url);
    await expect.poll(() => closed, { timeout: 5000 }).toBe(1);
  });

  it("closes an idle connection before the server's announced keep-alive time-out ends", async () => {
    // timeout=1: within the margin, so the connection is not kept at all.
    const server = await scripted((socket) =>
      socket.write('HTTP/1.1 204 No Content\r\nkeep-alive: timeout=1\r\n\r\n'),
    );
    const c = client();
    await post(c, server.url);
    await post(c, server.url);
    expect(server.connections).toBe(2);
    // A longer one leaves the connection to be reused.
    const lasting = await scripted((socket) =>
      socket.write('HTTP/1.1 204 No Content\r\nkeep-alive: timeout=60\r\n\r\n'),
    );
    await post(c, lasting.url);
    await post(c, lasting.url);
    expect(lasting.connections).toBe(1);
  });

  it('forgets an origin once it has no connection left', async () => {
    const server = await scripted((socket) =>
      socket.end('HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n'),
    );
    const c = client();
    await post(c, server.url);
    await expect.poll(() => c.originsInUse).toBe(0);
    const kept = await scripted((socket) => socket.write('HTTP/1.1 204 No Content\r\n\r\n'));
    await post(c, kept.url);
    expect(c.originsInUse).toBe(1);
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
            res.writeHead(200, { 'content-type': 'text/plain' }).end(Buffer.concat(chunks));
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
      const c = client({ connectionsPerOrigin: 3 });
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => post(c, url, { body: `{"n":${i}}` }).then(text)),
      );
      expect(answers).toEqual(Array.from({ length: 30 }, (_, i) => `{"n":${i}}`));
      expect(connections).toBe(3);
      expect(maxInFlight).toBe(3);
    });
  });
});
