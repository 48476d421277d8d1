// Runs the code blocks of packages/consumer/README.md and docs/signatures.md that are marked
// `<!-- snippet: name -->`, so the documentation cannot drift from the package. Each block is written
// to a temporary .mjs file with its imports pointed at this package's source and the repository's
// node_modules, then imported (or, for Express, which the repository does not install, parsed).
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createWebhookHandler,
  generateEd25519KeyPair,
  generateSecret,
  signatureHeader,
  type DedupeStore,
  type WebhookEvent,
} from '../src/index.js';
import vectors from './vectors.json' with { type: 'json' };

const root = fileURLToPath(new URL('../../../', import.meta.url));
const requireFromRoot = createRequire(join(root, 'package.json'));
const dir = join(tmpdir(), `hookline-readme-snippets-${randomUUID()}`);
mkdirSync(dir);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function snippetsOf(file: string): Map<string, string> {
  const text = readFileSync(join(root, file), 'utf8');
  const found = new Map<string, string>();
  for (const match of text.matchAll(/<!-- snippet: ([\w-]+) -->\s*```js\n([\s\S]*?)```/g)) {
    found.set(match[1]!, match[2]!);
  }
  return found;
}

const readme = snippetsOf('packages/consumer/README.md');
const docs = snippetsOf('docs/signatures.md');

function write(code: string, name: string): string {
  const imports: Record<string, string> = {
    '@hookline/consumer': pathToFileURL(join(root, 'packages/consumer/src/index.ts')).href,
    fastify: pathToFileURL(requireFromRoot.resolve('fastify')).href,
  };
  const rewritten = code.replace(/from '([^']+)'/g, (whole, spec: string) =>
    imports[spec] ? `from '${imports[spec]}'` : whole,
  );
  const file = join(dir, `${name.replace(/\W+/g, '-')}-${randomUUID()}.mjs`);
  writeFileSync(file, rewritten);
  return file;
}

/** Imports a snippet with the given environment variables set while it loads. */
async function load<T>(code: string, name: string, env: Record<string, string> = {}): Promise<T> {
  const saved = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]));
  Object.assign(process.env, env);
  try {
    return (await import(/* @vite-ignore */ pathToFileURL(write(code, name)).href)) as T;
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
}

function snippet(source: Map<string, string>, name: string): string {
  const code = source.get(name);
  if (code === undefined) throw new Error(`snippet ${name} not found`);
  return code;
}

const body = '{"type":"user.created","data":{"userId":"user_29w"}}';
const secret = generateSecret();
const keys = generateEd25519KeyPair();

/** Headers of a delivery signed now, the way hookline signs it. */
function signed(
  signingKeys: string[],
  id = `msg_${randomUUID()}`,
  raw = body,
  ts = Math.floor(Date.now() / 1000),
) {
  return {
    'content-type': 'application/json',
    'hook-id': id,
    'hook-timestamp': String(ts),
    'hook-signature': signatureHeader({ secrets: signingKeys, id, timestamp: ts, body: raw }),
  };
}

async function post(url: string, signingKeys: string[], id?: string, raw = body): Promise<Response> {
  return fetch(url, { method: 'POST', headers: signed(signingKeys, id, raw), body: raw });
}

describe('every marked snippet is valid JavaScript', () => {
  const all = [...readme].map(([name, code]) => [`README ${name}`, code] as const);
  all.push(...[...docs].map(([name, code]) => [`signatures.md ${name}`, code] as const));

  it('finds the snippets the tests below run', () => {
    for (const name of [
      'verify-v1',
      'verify-v1a',
      'node-http',
      'redis-store',
      'sql-store',
      'express',
      'fastify',
    ]) {
      expect(readme.has(name), name).toBe(true);
    }
    for (const name of ['plain-v1', 'plain-v1a']) {
      expect(readme.has(name), name).toBe(true);
      expect(docs.has(name), name).toBe(true);
    }
  });

  it.each(all)('%s parses', (name, code) => {
    const file = write(code, name);
    expect(() => execFileSync(process.execPath, ['--check', file], { stdio: 'pipe' })).not.toThrow();
  });
});

describe.each([
  ['README', readme],
  ['docs/signatures.md', docs],
])('plain node:crypto verifiers in %s', (label, source) => {
  type Plain = (key: string, headers: Record<string, string>, raw: Buffer, tolerance?: number) => boolean;

  it('verifyV1 accepts the library signatures (alone, rotated, mixed) and refuses tampering', async () => {
    const { verifyV1 } = await load<{ verifyV1: Plain }>(snippet(source, 'plain-v1'), `${label}-plain-v1`);
    const raw = Buffer.from(body);
    const old = generateSecret();
    expect(verifyV1(secret, signed([secret]), raw)).toBe(true);
    expect(verifyV1(secret, signed([old, secret]), raw)).toBe(true);
    expect(verifyV1(secret, signed([keys.privateKey, secret]), raw)).toBe(true);
    expect(verifyV1(secret, signed([keys.privateKey]), raw)).toBe(false);
    expect(verifyV1(secret, signed([secret]), Buffer.from(body + ' '))).toBe(false);
    expect(verifyV1(old, signed([secret]), raw)).toBe(false);
    const stale = signed([secret], 'msg_stale', body, Math.floor(Date.now() / 1000) - 400);
    expect(verifyV1(secret, stale, raw)).toBe(false);
    for (const vector of vectors.v1.filter((v) => v.body.includes('"type"'))) {
      const headers = {
        'hook-id': vector.id,
        'hook-timestamp': String(vector.timestamp),
        'hook-signature': vector.signature,
      };
      expect(verifyV1(vector.secret, headers, Buffer.from(vector.body), Infinity)).toBe(true);
    }
  });

  it('verifyV1a accepts the library signatures (alone, rotated, mixed) and refuses tampering', async () => {
    const { verifyV1a } = await load<{ verifyV1a: Plain }>(
      snippet(source, 'plain-v1a'),
      `${label}-plain-v1a`,
    );
    const raw = Buffer.from(body);
    const old = generateEd25519KeyPair();
    expect(verifyV1a(keys.publicKey, signed([keys.privateKey]), raw)).toBe(true);
    expect(verifyV1a(keys.publicKey, signed([old.privateKey, keys.privateKey]), raw)).toBe(true);
    expect(verifyV1a(keys.publicKey, signed([keys.privateKey, secret]), raw)).toBe(true);
    expect(verifyV1a(keys.publicKey, signed([secret]), raw)).toBe(false);
    expect(verifyV1a(keys.publicKey, signed([keys.privateKey]), Buffer.from(body + ' '))).toBe(false);
    expect(verifyV1a(old.publicKey, signed([keys.privateKey]), raw)).toBe(false);
    const stale = signed([keys.privateKey], 'msg_stale', body, Math.floor(Date.now() / 1000) - 400);
    expect(verifyV1a(keys.publicKey, stale, raw)).toBe(false);
    for (const vector of vectors.v1a) {
      const headers = {
        'hook-id': vector.id,
        'hook-timestamp': String(vector.timestamp),
        'hook-signature': vector.signature,
      };
      expect(verifyV1a(vector.publicKey, headers, Buffer.from(vector.body), Infinity)).toBe(true);
    }
  });
});

describe('README verifyWebhook snippets', () => {
  it('verify-v1 answers 200 with the event, 400 with the reason', async () => {
    type Result = { status: number; event?: WebhookEvent; reason?: string };
    const { handleDelivery } = await load<{ handleDelivery: (h: object, b: string) => Result }>(
      snippet(readme, 'verify-v1'),
      'verify-v1',
      { HOOKLINE_SECRET: secret },
    );
    // The snippet reads the variable on each call, as an application would.
    process.env.HOOKLINE_SECRET = secret;
    try {
      expect(handleDelivery(signed([secret]), body)).toMatchObject({
        status: 200,
        event: { type: 'user.created' },
      });
      expect(handleDelivery(signed([generateSecret()]), body)).toEqual({
        status: 400,
        reason: 'invalid_signature',
      });
    } finally {
      delete process.env.HOOKLINE_SECRET;
    }
  });

  it('verify-v1a verifies with the public key', async () => {
    const { verifyV1a } = await load<{ verifyV1a: (h: object, b: string) => WebhookEvent }>(
      snippet(readme, 'verify-v1a'),
      'verify-v1a',
    );
    process.env.HOOKLINE_PUBLIC_KEY = keys.publicKey;
    try {
      expect(verifyV1a(signed([keys.privateKey]), body).type).toBe('user.created');
      expect(() => verifyV1a(signed([secret]), body)).toThrow(
        expect.objectContaining({ reason: 'invalid_signature' }),
      );
    } finally {
      delete process.env.HOOKLINE_PUBLIC_KEY;
    }
  });
});

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

describe('README servers', () => {
  // The snippets log each event, as an example would; keep the test output for failures.
  beforeEach(() => void vi.spyOn(console, 'log').mockImplementation(() => {}));
  afterEach(() => void vi.restoreAllMocks());

  it('node-http: a signed delivery is acknowledged once, then as a duplicate; a forgery gets 400', async () => {
    const { server } = await load<{ server: Server }>(snippet(readme, 'node-http'), 'node-http', {
      HOOKLINE_SECRET: secret,
      PORT: '0',
    });
    try {
      if (!server.listening) await new Promise((resolve) => server.once('listening', resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
      const id = `msg_${randomUUID()}`;
      expect((await post(url, [secret], id)).status).toBe(200);
      expect(await (await post(url, [secret], id)).json()).toEqual({ duplicate: true });
      expect((await post(url, [generateSecret()])).status).toBe(400);
      expect((await fetch(url.replace('/webhooks', '/other'), { method: 'POST' })).status).toBe(404);
    } finally {
      await close(server);
    }
  });

  it('fastify: the route sees the raw body, so signed deliveries verify', async () => {
    type App = { server: Server; close: () => Promise<void> };
    const { app } = await load<{ app: App }>(snippet(readme, 'fastify'), 'fastify', {
      HOOKLINE_SECRET: secret,
      PORT: '0',
    });
    try {
      const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/webhooks`;
      const id = `msg_${randomUUID()}`;
      // Pretty-printed: a route that re-serialised parsed JSON would not reproduce these bytes.
      const pretty = JSON.stringify(JSON.parse(body), null, 2);
      expect((await post(url, [secret], id, pretty)).status).toBe(200);
      expect(await (await post(url, [secret], id, pretty)).json()).toEqual({ duplicate: true });
      const forged = await post(url, [generateSecret()]);
      expect(forged.status).toBe(400);
      expect(await forged.json()).toMatchObject({ error: { code: 'invalid_signature' } });
    } finally {
      await app.close();
    }
  });
});

describe('README dedupe stores', () => {
  async function runStore(store: DedupeStore): Promise<void> {
    let calls = 0;
    let fail = true;
    const handler = createWebhookHandler({
      secret,
      store,
      onEvent: () => {
        calls += 1;
        if (fail) throw new Error('first run fails');
      },
      onError: () => {},
    });
    const { createServer } = await import('node:http');
    const server = createServer((req, res) => void handler(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const id = `msg_${randomUUID()}`;
      expect((await post(url, [secret], id)).status).toBe(500); // released: the retry runs it again
      fail = false;
      expect((await post(url, [secret], id)).status).toBe(200);
      expect(await (await post(url, [secret], id)).json()).toEqual({ duplicate: true });
      expect(calls).toBe(2);
      expect(await store.claim(`msg_${randomUUID()}`)).toBe('claimed');
    } finally {
      await close(server);
    }
  }

  it('sql-store on a real PostgreSQL: claim, release after a failure, complete, duplicate, lease', async () => {
    const { sqlDedupeStore } = await load<{ sqlDedupeStore: (pool: pg.Pool) => DedupeStore }>(
      snippet(readme, 'sql-store'),
      'sql-store',
    );
    const schema = `consumer_readme_${randomUUID().replace(/-/g, '')}`;
    const url = process.env.HOOKLINE_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    await admin.query(`CREATE SCHEMA ${schema}`);
    const pool = new pg.Pool({ connectionString: url, max: 2, options: `-c search_path=${schema}` });
    try {
      const ddl = snippet(readme, 'sql-store').match(/\/\/ (CREATE TABLE[\s\S]*?\);)/)![1]!;
      await pool.query(ddl.replace(/^\/\/ ?/gm, '').replace(/--.*$/gm, ''));
      const store = sqlDedupeStore(pool);
      await runStore(store);
      // A claim still in its lease is in progress; one whose lease ran out can be taken over.
      expect(await store.claim('msg_lease')).toBe('claimed');
      expect(await store.claim('msg_lease')).toBe('in_progress');
      await pool.query(`UPDATE webhook_receipts SET updated_at = now() - interval '61 seconds'`);
      expect(await store.claim('msg_lease')).toBe('claimed');
    } finally {
      await pool.end();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.end();
    }
  });

  it('redis-store against a stand-in with the redis client set/get/del semantics it relies on', async () => {
    const { redisDedupeStore } = await load<{ redisDedupeStore: (redis: object) => DedupeStore }>(
      snippet(readme, 'redis-store'),
      'redis-store',
    );
    // No Redis client is installed in this repository; this stand-in follows `SET … NX EX` as the
    // redis package documents it (answers 'OK', or null when NX finds the key).
    const data = new Map<string, string>();
    const redis = {
      async set(key: string, value: string, options: { NX?: boolean; EX?: number } = {}) {
        if (options.NX && data.has(key)) return null;
        data.set(key, value);
        return 'OK';
      },
      async get(key: string) {
        return data.get(key) ?? null;
      },
      async del(key: string) {
        return data.delete(key) ? 1 : 0;
      },
    };
    await runStore(redisDedupeStore(redis));
    expect(await redisDedupeStore(redis).claim('msg_x')).toBe('claimed');
    expect(await redisDedupeStore(redis).claim('msg_x')).toBe('in_progress');
  });
});
