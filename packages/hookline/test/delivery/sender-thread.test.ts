// The sender in a thread of its own (delivery/sender-thread.ts), against real local servers: each
// result comes back to its own attempt, whatever the batching, and the thread's shutdown, abort and
// death end every attempt still pending. A thread cannot load the TypeScript sources, so this suite
// runs the compiled module (`npm test` builds first), as `hookline worker` and `serve` do.
import { afterEach, describe, expect, it } from 'vitest';
import { SenderThread, sendsFromThread } from '../../dist/delivery/sender-thread.js';
import { closedPort, sleep, startRawServer, type RawServer } from './support.js';

const request = (url: string, body = '{"type":"user.created","data":{"userId":"user_1"}}') => ({
  url,
  headers: { 'content-type': 'application/json', 'hook-id': 'msg_test' },
  body,
});

describe('SenderThread', () => {
  const servers: RawServer[] = [];
  const senders: SenderThread[] = [];
  const serve = async (handler: Parameters<typeof startRawServer>[0]) => {
    const s = await startRawServer(handler);
    servers.push(s);
    return s;
  };
  const sender = (timeoutMs = 2000, onStopped?: (reason: string) => void) => {
    const s = new SenderThread({ timeoutMs, allowPrivateNetworks: true }, onStopped);
    senders.push(s);
    return s;
  };
  afterEach(async () => {
    await Promise.all(senders.splice(0).map((s) => s.close()));
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('sends the body as is, and each of many concurrent attempts gets its own answer', async () => {
    // The answer's status is chosen by the body, so a result matched to the wrong attempt shows.
    const server = await serve((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const n = Number(JSON.parse(body).n);
        res.writeHead(n % 3 === 0 ? 500 : 200 + (n % 7)).end(`answer ${n}`);
      });
    });
    const s = sender();
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, n) => s.send(request(server.url, JSON.stringify({ n })))),
    );
    results.forEach((r, n) => {
      if (n % 3 === 0) {
        expect(r).toMatchObject({ ok: false, status: 500, error: `HTTP 500: answer ${n}` });
      } else {
        expect(r).toMatchObject({ ok: true, status: 200 + (n % 7), error: null });
      }
      expect(r.durationMs).toBeGreaterThan(0);
    });
    expect(server.requests).toBe(200);
  });

  it("reads Retry-After and the subscriber's error as the in-thread sender does", async () => {
    const server = await serve((_req, res) => res.writeHead(429, { 'retry-after': '7' }).end('slow down'));
    const r = await sender().send(request(server.url));
    expect(r).toMatchObject({ ok: false, status: 429, error: 'HTTP 429: slow down', retryAfterMs: 7000 });
  });

  it('refuses private addresses inside the thread unless they are allowed', async () => {
    const server = await serve((_req, res) => res.writeHead(204).end());
    const guarded = new SenderThread({ timeoutMs: 2000, allowPrivateNetworks: false });
    senders.push(guarded);
    const r = await guarded.send(request(server.url));
    expect(r.ok).toBe(false);
    expect(r.status).toBeNull();
    expect(r.error).toMatch(/private|blocked|not allowed/i);
    expect(server.requests).toBe(0);
  });

  it('times out and reports refused connections', async () => {
    const hanging = await serve(() => {});
    const s = sender(300);
    const [slow, refused] = await Promise.all([
      s.send(request(hanging.url)),
      s.send(request(`http://127.0.0.1:${await closedPort()}/hook`)),
    ]);
    expect(slow).toMatchObject({ ok: false, status: null, error: 'timed out after 300 ms' });
    expect(refused).toMatchObject({ ok: false, status: null });
    expect(refused.error).toMatch(/ECONNREFUSED/);
  });

  it('abortAll ends the attempts in flight at once', async () => {
    const hanging = await serve(() => {});
    const s = sender(60_000);
    const pending = Promise.all([s.send(request(hanging.url)), s.send(request(hanging.url))]);
    while (hanging.requests < 2) await sleep(10);
    s.abortAll();
    // With a 60 s time-out, only abortAll ends them within the test's time.
    const results = await pending;
    for (const r of results) expect(r).toMatchObject({ ok: false, status: null });
  });

  it('close ends what is pending, and later attempts fail without being sent', async () => {
    const hanging = await serve(() => {});
    const s = sender(60_000);
    const pending = s.send(request(hanging.url));
    while (hanging.requests < 1) await sleep(10);
    await s.close();
    expect((await pending).ok).toBe(false);
    const after = await s.send(request(hanging.url));
    expect(after).toMatchObject({ ok: false, status: null, error: 'attempt cancelled' });
    expect(hanging.requests).toBe(1);
  });

  it('an attempt sent just before close is cancelled, and starts no thread', async () => {
    const server = await serve((_req, res) => res.writeHead(204).end());
    const s = sender();
    const sent = s.send(request(server.url)); // leaves at the end of this task, after close()
    const closed = s.close();
    expect(await sent).toMatchObject({ ok: false, status: null, error: 'attempt cancelled' });
    await closed;
    expect((s as unknown as { worker: unknown }).worker).toBeNull();
    expect(server.requests).toBe(0);
  });

  it('a thread that dies fails its pending attempts, is reported, and the next attempt starts another', async () => {
    const hanging = await serve(() => {});
    const ok = await serve((_req, res) => res.writeHead(204).end());
    const stopped: string[] = [];
    const s = sender(60_000, (reason) => stopped.push(reason));
    const pending = s.send(request(hanging.url));
    while (hanging.requests < 1) await sleep(10);
    // No message makes the thread die; ending it from outside is what a crash looks like here.
    await (s as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
    expect(await pending).toMatchObject({ ok: false, status: null });
    expect((await pending).error).toMatch(/^sender thread stopped/);
    expect(stopped).toHaveLength(1);
    expect(await s.send(request(ok.url))).toMatchObject({ ok: true, status: 204 });
  });

  it('a worker sends from a thread on SQLite (the default store included), from its main thread on PostgreSQL', () => {
    expect(sendsFromThread(undefined)).toBe(true);
    expect(sendsFromThread('')).toBe(true);
    expect(sendsFromThread('sqlite:./data/hookline.db')).toBe(true);
    expect(sendsFromThread(' postgres://postgres@127.0.0.1:5432/test')).toBe(false);
    expect(sendsFromThread('postgresql://postgres@127.0.0.1/test')).toBe(false);
  });
});
