// Answers on a real socket, from a real `hookline serve` process: every refusal, including the ones
// node:http makes before any route runs, has the one shape {"error": {"code", "message"}}
// (docs/contract.md §4), and a client sending far too much still reads its 413 instead of a reset.
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startProcess, type RunningProcess } from '../helpers/process.js';
import { startTestService, testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase, type TestDatabase } from '../helpers/stores.js';
import { SNAKE_CASE } from './support.js';

interface Answer {
  status: number;
  contentType: string;
  body: string;
}

/** Asserts the error shape on an answer read off the wire; returns the code. */
function expectWireError(answer: Answer | string, status: number, code?: string): string {
  expect(typeof answer, `no answer: ${String(answer)}`).toBe('object');
  const a = answer as Answer;
  expect(a.status, a.body).toBe(status);
  expect(a.contentType).toMatch(/^application\/json/);
  const body = JSON.parse(a.body) as { error: { code: string; message: string } };
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message']);
  expect(body.error.code).toMatch(SNAKE_CASE);
  expect(body.error.message.length).toBeGreaterThan(0);
  if (code !== undefined) expect(body.error.code).toBe(code);
  return body.error.code;
}

/** One request with node:http; a transport error comes back as its code instead of an answer. */
function viaNodeHttp(
  address: string,
  o: { method?: string; path: string; headers?: Record<string, string>; body?: Buffer; chunked?: boolean },
): Promise<Answer | string> {
  const url = new URL(address);
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: o.method ?? 'GET',
        path: o.path,
        agent: false,
        headers: {
          ...o.headers,
          ...(o.body && !o.chunked ? { 'content-length': String(o.body.length) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            contentType: res.headers['content-type'] ?? '',
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', (err: NodeJS.ErrnoException) => resolve(`response ${err.code ?? err.message}`));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve(`request ${err.code ?? err.message}`));
    if (o.body && o.chunked) {
      for (let i = 0; i < o.body.length; i += 64 * 1024) req.write(o.body.subarray(i, i + 64 * 1024));
      req.end();
    } else req.end(o.body);
  });
}

async function viaFetch(address: string, path: string, init: RequestInit = {}): Promise<Answer | string> {
  try {
    const res = await fetch(`${address}${path}`, init);
    return {
      status: res.status,
      contentType: res.headers.get('content-type') ?? '',
      body: await res.text(),
    };
  } catch (err) {
    const cause = (err as { cause?: NodeJS.ErrnoException }).cause;
    return `fetch ${cause?.code ?? String(err)}`;
  }
}

/** Writes raw bytes on a fresh connection and reads every answer until the server closes it. */
async function rawExchange(
  address: string,
  bytes: string | Buffer,
  then?: () => Promise<string>,
): Promise<Answer[]> {
  const url = new URL(address);
  const socket = net.connect(Number(url.port), url.hostname);
  await once(socket, 'connect');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const closed = once(socket, 'close');
  socket.write(bytes);
  if (then) socket.write(await then());
  await closed;
  return parseAnswers(Buffer.concat(chunks).toString('latin1'));
}

/** Splits HTTP/1.1 answers with content-length bodies, as a pipelining client would. */
function parseAnswers(text: string): Answer[] {
  const answers: Answer[] = [];
  let rest = text;
  while (rest.startsWith('HTTP/1.1 ')) {
    const headEnd = rest.indexOf('\r\n\r\n');
    const head = rest.slice(0, headEnd);
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    answers.push({
      status: Number(head.slice(9, 12)),
      contentType: /\r\ncontent-type: *([^\r]+)/i.exec(head)?.[1] ?? '',
      body: Buffer.from(rest.slice(headEnd + 4, headEnd + 4 + length), 'latin1').toString('utf8'),
    });
    rest = rest.slice(headEnd + 4 + length);
  }
  expect(rest, 'bytes after the last answer').toBe('');
  return answers;
}

const FIVE_MB = Buffer.from(
  JSON.stringify({ url: 'https://a.example/', events: ['*'], description: 'x'.repeat(5_000_000) }),
);
const TRIES = 30;

describe.each(STORE_KINDS)('answers on the wire on %s', (kind) => {
  let database: TestDatabase;
  let api: RunningProcess;
  let tenantKey: string;
  const auth = () => ({ authorization: `Bearer ${tenantKey}`, 'content-type': 'application/json' });

  beforeAll(async () => {
    database = await createTestDatabase(kind);
    const env = testEnv(database);
    tenantKey = (await runCli(['keys', 'create', '--role', 'tenant', '--tenant', 'acme'], env)).stdout.trim();
    api = await startProcess(['serve', '--no-worker'], env);
  });
  afterAll(async () => {
    await api?.kill('SIGKILL');
    await database?.drop();
  });

  it(`answers a 5 MB body with a clean 413 in ${TRIES} of ${TRIES} tries, with undici fetch and node:http`, async () => {
    const outcomes: Record<string, (Answer | string)[]> = {
      fetch: [],
      'node:http': [],
      'node:http chunked': [],
    };
    for (let i = 0; i < TRIES; i++) {
      outcomes['fetch']!.push(
        await viaFetch(api.address, '/v1/webhooks', { method: 'POST', headers: auth(), body: FIVE_MB }),
      );
      outcomes['node:http']!.push(
        await viaNodeHttp(api.address, {
          method: 'POST',
          path: '/v1/webhooks',
          headers: auth(),
          body: FIVE_MB,
        }),
      );
      outcomes['node:http chunked']!.push(
        await viaNodeHttp(api.address, {
          method: 'POST',
          path: '/v1/webhooks',
          headers: auth(),
          body: FIVE_MB,
          chunked: true,
        }),
      );
    }
    for (const [client, answers] of Object.entries(outcomes)) {
      const failures = answers.filter((a) => typeof a === 'string');
      expect(failures, `${client}: ${failures.length} of ${TRIES} tries got no answer`).toEqual([]);
      for (const answer of answers) expectWireError(answer, 413, 'payload_too_large');
    }
    expect((await viaFetch(api.address, '/healthz')) as Answer).toMatchObject({ status: 200 });
  });

  it('answers a path or headers over 16 KiB with 431 headers_too_large in the error shape', async () => {
    expectWireError(
      await viaFetch(api.address, `/v1/webhooks/${'w'.repeat(20 * 1024)}`),
      431,
      'headers_too_large',
    );
    expectWireError(
      await viaNodeHttp(api.address, {
        path: `/v1/webhooks?cursor=${'c'.repeat(17 * 1024)}`,
        headers: auth(),
      }),
      431,
      'headers_too_large',
    );
    expectWireError(
      await viaNodeHttp(api.address, {
        path: '/v1/webhooks',
        headers: { ...auth(), 'x-pad': 'p'.repeat(20 * 1024) },
      }),
      431,
      'headers_too_large',
    );
  });

  it.each([
    ['bytes that are not HTTP', 'GARBAGE\r\n\r\n'],
    ['an unknown method', 'BREW /v1/webhooks HTTP/1.1\r\nhost: x\r\n\r\n'],
    ['a header line without a colon', 'GET /healthz HTTP/1.1\r\nhost: x\r\nnot a header\r\n\r\n'],
    ['a NUL byte in a header', 'GET /healthz HTTP/1.1\r\nhost: x\r\nx-a: a\u0000b\r\n\r\n'],
    ['a NUL byte in the request line', 'GET /healthz\u0000 HTTP/1.1\r\nhost: x\r\n\r\n'],
    [
      'a content-length that is not a number',
      'POST /v1/webhooks HTTP/1.1\r\nhost: x\r\ncontent-length: ten\r\n\r\n',
    ],
    [
      'two content-lengths',
      'POST /v1/events HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n{}',
    ],
  ])('answers %s with 400 bad_request in the error shape', async (_what, bytes) => {
    const answers = await rawExchange(api.address, bytes);
    expect(answers).toHaveLength(1);
    expectWireError(answers[0]!, 400, 'bad_request');
  });

  it.each([
    ['invalid JSON', 'POST', '/v1/webhooks', '{', 'application/json', 400, 'invalid_json'],
    ['an unknown route', 'GET', '/v2/nothing', undefined, undefined, 404, 'not_found'],
    ['a method the route lacks', 'PUT', '/v1/webhooks', '{}', 'application/json', 404, 'not_found'],
    ['a body that is not JSON', 'POST', '/v1/webhooks', 'url=x', 'text/plain', 415, 'unsupported_media_type'],
    [
      'bad percent-encoding in an id',
      'GET',
      '/v1/webhooks/%E0%A4%A',
      undefined,
      undefined,
      400,
      'invalid_id',
    ],
    ['an id with NUL', 'GET', '/v1/webhooks/%00', undefined, undefined, 400, 'validation_failed'],
    [
      'a body just over 256 KiB',
      'POST',
      '/v1/webhooks',
      `"${'x'.repeat(300 * 1024)}"`,
      'application/json',
      413,
      'payload_too_large',
    ],
  ])('answers %s with the error shape', async (_what, method, path, body, type, status, code) => {
    const answer = await viaFetch(api.address, path, {
      method,
      headers: { authorization: `Bearer ${tenantKey}`, ...(type ? { 'content-type': type } : {}) },
      ...(body !== undefined ? { body } : {}),
    });
    expectWireError(answer, status, code);
    const noKey = await viaFetch(api.address, path, { method, ...(body !== undefined ? { body } : {}) });
    expect(typeof noKey).toBe('object');
    expectWireError(noKey, (noKey as Answer).status);
  });

  it("answers 431 in the error shape on a worker's health port too", async () => {
    const worker = await startProcess(['worker'], testEnv(database));
    try {
      expectWireError(await viaFetch(worker.address, `/${'w'.repeat(20 * 1024)}`), 431, 'headers_too_large');
      const [answer] = await rawExchange(worker.address, 'GARBAGE\r\n\r\n');
      expectWireError(answer!, 400, 'bad_request');
    } finally {
      await worker.kill('SIGKILL');
    }
  });
});

describe.each(STORE_KINDS)('answers while shutting down on %s', (kind) => {
  it('answers a request that arrives on an open connection during shutdown with 503 shutting_down', async () => {
    const t = await startTestService(kind);
    const app = t.service.app!;
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    let closing: Promise<void> | null = null;
    try {
      // The first request is under way (its body half sent) when shutdown starts, so its connection
      // stays open; the second, pipelined behind it, arrives during shutdown.
      const routed = once(app.server, 'request');
      const answers = await rawExchange(
        address,
        `POST /v1/webhooks HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${t.keys.tenant}\r\n` +
          'content-type: application/json\r\ncontent-length: 2\r\n\r\n{',
        async () => {
          await routed;
          closing = t.close();
          // New connections are refused once the server has stopped listening, after the hooks
          // that mark it as closing have run.
          while (typeof (await viaFetch(address, '/healthz')) === 'object');
          return '}GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n';
        },
      );
      expect(answers).toHaveLength(2);
      expectWireError(answers[0]!, 400, 'validation_failed');
      expectWireError(answers[1]!, 503, 'shutting_down');
    } finally {
      await (closing ?? t.close());
    }
  });
});
