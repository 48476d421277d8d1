// The sender on its own, against real local servers: what counts as a failure (docs/contract.md §5) and
// how hookline protects itself from its subscribers (redirects, slow bodies, huge bodies, private
// addresses).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RESPONSE_BODY_CAP_BYTES, Sender } from '../../src/delivery/sender.js';
import { closedPort, sleep, startRawServer, type RawServer } from './support.js';

const request = (url: string) => ({
  url,
  headers: { 'content-type': 'application/json', 'hook-id': 'msg_test' },
  body: '{"type":"user.created","data":{"userId":"user_1"}}',
});

describe('Sender', () => {
  let sender: Sender;
  const servers: RawServer[] = [];
  const serve = async (handler: Parameters<typeof startRawServer>[0]) => {
    const s = await startRawServer(handler);
    servers.push(s);
    return s;
  };

  beforeAll(() => {
    sender = new Sender({ timeoutMs: 600, allowPrivateNetworks: true });
  });
  afterAll(async () => sender.close());
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('2xx is a success and the body is delivered as is', async () => {
    let received = '';
    let method = '';
    const server = await serve((req, res) => {
      method = req.method ?? '';
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString('utf8')));
      req.on('end', () => {
        received = body;
        res.writeHead(204).end();
      });
    });
    const result = await sender.send(request(server.url));
    expect(result).toMatchObject({ ok: true, status: 204, error: null, retryAfterMs: null });
    expect(method).toBe('POST');
    expect(received).toBe(request('').body);
  });

  it('a non-2xx answer is a failure carrying the status and the start of the body', async () => {
    const server = await serve((_req, res) => res.writeHead(500).end('database is down'));
    const result = await sender.send(request(server.url));
    expect(result).toMatchObject({ ok: false, status: 500, error: 'HTTP 500: database is down' });
  });

  it('a 3xx redirect is a failure and is not followed', async () => {
    const target = await serve((_req, res) => res.writeHead(200).end('ok'));
    const redirecting = await serve((_req, res) => res.writeHead(307, { location: target.url }).end());
    const result = await sender.send(request(redirecting.url));
    expect(result.ok).toBe(false);
    expect(result.status).toBe(307);
    expect(result.error).toMatch(/^HTTP 307 \(redirects are not followed\)/);
    const moved = await serve((_req, res) => res.writeHead(301, { location: target.url }).end());
    expect(await sender.send(request(moved.url))).toMatchObject({ ok: false, status: 301 });
    await sleep(50);
    expect(target.requests).toBe(0);
    expect(target.connections).toBe(0);
  });

  it('the time-out covers the whole attempt: a body trickled under the idle timeout still fails in time', async () => {
    let ticker: NodeJS.Timeout | undefined;
    const server = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('.');
      // One byte every 100 ms: never idle long enough for a per-read timeout to fire.
      ticker = setInterval(() => res.write('.'), 100);
      res.on('close', () => clearInterval(ticker));
    });
    const result = await sender.send(request(server.url));
    clearInterval(ticker);
    expect(result.ok).toBe(false);
    expect(result.status).toBeNull();
    expect(result.error).toBe('timed out after 600 ms');
    expect(result.durationMs).toBeGreaterThanOrEqual(550);
  });

  it('a subscriber that never answers fails at the time-out', async () => {
    const server = await serve(() => {});
    const result = await sender.send(request(server.url));
    expect(result).toMatchObject({ ok: false, status: null, error: 'timed out after 600 ms' });
  });

  it(`reads at most RESPONSE_BODY_CAP_BYTES (${RESPONSE_BODY_CAP_BYTES}) of a huge answer`, async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    let written = 0;
    let closed!: () => void;
    const responseClosed = new Promise<void>((resolve) => (closed = resolve));
    const server = await serve((_req, res) => {
      res.on('close', closed);
      res.writeHead(500, { 'content-type': 'text/plain' });
      // 10 MB, written as fast as the socket takes it.
      const pump = () => {
        while (written < 10 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    const result = await sender.send(request(server.url));
    expect(result.ok).toBe(false);
    expect(result.status).toBe(500);
    expect(result.error).toMatch(/^HTTP 500: x+$/);
    expect(result.error!.length).toBeLessThanOrEqual(RESPONSE_BODY_CAP_BYTES + 20);
    expect(result.error!.length).toBeLessThanOrEqual(1024 + 'HTTP 500: '.length);
    // The rest was never read: the connection was dropped instead of draining 10 MB (the server's
    // writes then fail, and it stops short of the end).
    await responseClosed;
    expect(written).toBeLessThan(10 * 1024 * 1024);
  });

  it('connection refused is a failure with a readable error', async () => {
    const port = await closedPort();
    const result = await sender.send(request(`http://127.0.0.1:${port}/hook`));
    expect(result.ok).toBe(false);
    expect(result.status).toBeNull();
    expect(result.error).toMatch(/ECONNREFUSED/);
    expect(result.error).toContain(String(port));
  });

  it('429 with Retry-After in seconds gives retryAfterMs', async () => {
    const server = await serve((_req, res) => res.writeHead(429, { 'retry-after': '7' }).end('slow down'));
    const result = await sender.send(request(server.url));
    expect(result).toMatchObject({ ok: false, status: 429, retryAfterMs: 7000 });
    expect(result.error).toBe('HTTP 429: slow down');
  });

  it('429 and 503 with Retry-After as an HTTP date give retryAfterMs from now', async () => {
    const at = new Date(Math.floor(Date.now() / 1000) * 1000 + 60_000).toUTCString();
    const server = await serve((_req, res) => res.writeHead(503, { 'retry-after': at }).end());
    const now = Date.parse(at) - 30_000;
    const result = await sender.send(request(server.url), undefined, () => now);
    expect(result).toMatchObject({ ok: false, status: 503, retryAfterMs: 30_000 });
  });

  it('Retry-After on other statuses and garbage Retry-After are ignored', async () => {
    const server = await serve((req, res) =>
      req.url === '/garbage'
        ? res.writeHead(429, { 'retry-after': 'soon' }).end()
        : res.writeHead(500, { 'retry-after': '60' }).end(),
    );
    expect((await sender.send(request(server.url))).retryAfterMs).toBeNull();
    expect((await sender.send(request(server.url.replace('/hook', '/garbage')))).retryAfterMs).toBeNull();
  });

  it('410 Gone is reported as status 410', async () => {
    const server = await serve((_req, res) => res.writeHead(410).end('gone'));
    expect(await sender.send(request(server.url))).toMatchObject({ ok: false, status: 410 });
  });

  it('a cancelled attempt stops at once', async () => {
    const server = await serve(() => {});
    const abort = new AbortController();
    const long = new Sender({ timeoutMs: 60_000, allowPrivateNetworks: true });
    const pending = long.send(request(server.url), abort.signal);
    await expect.poll(() => server.requests).toBe(1);
    abort.abort();
    // With a 60 s time-out, only the cancel ends it within the test's time.
    expect(await pending).toMatchObject({ ok: false, status: null, error: 'attempt cancelled' });
    await long.close();
  });

  describe('with private networks refused', () => {
    let strict: Sender;
    beforeAll(() => {
      strict = new Sender({ timeoutMs: 1000, allowPrivateNetworks: false });
    });
    afterAll(async () => strict.close());

    it.each([
      ['127.0.0.1', (port: number) => `http://127.0.0.1:${port}/hook`],
      ['localhost', (port: number) => `http://localhost:${port}/hook`],
      ['[::1]', (port: number) => `http://[::1]:${port}/hook`],
      ['[::ffff:127.0.0.1]', (port: number) => `http://[::ffff:127.0.0.1]:${port}/hook`],
      ['127.1', (port: number) => `http://127.1:${port}/hook`],
    ])('%s is blocked before connecting', async (_name, url) => {
      const server = await serve((_req, res) => res.writeHead(200).end());
      const result = await strict.send(request(url(server.port)));
      expect(result.ok).toBe(false);
      expect(result.status).toBeNull();
      expect(result.error).toMatch(/^ERR_HOOKLINE_BLOCKED_ADDRESS: refusing to connect to /);
      expect(result.error).toContain('HOOKLINE_ALLOW_PRIVATE_NETWORKS');
      await sleep(30);
      expect(server.requests).toBe(0);
      expect(server.connections).toBe(0);
    });
  });
});
