// Drives hookline through its public surface only: the CLI (migrate, keys create, serve, worker),
// HOOKLINE_* variables and the HTTP API. Each instance gets a fresh database — a SQLite file in a
// temporary directory, or a PostgreSQL schema selected through `options=-c search_path=…` in the URL
// — which is removed when the instance closes.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { freePort, onCleanup, runHookline, spawnHookline, stop, waitHttpOk } from './processes.js';

export const PG_URL = process.env.HOOKLINE_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function pgQuery(sql) {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A fresh PostgreSQL schema for one run of something; dropped by the returned function. */
export async function createSchema(prefix) {
  const schema = `${prefix}_${randomBytes(4).toString('hex')}`;
  await pgQuery(`CREATE SCHEMA ${schema}`);
  let dropped = false;
  const drop = async () => {
    if (dropped) return;
    dropped = true;
    await pgQuery(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  };
  const forget = onCleanup(drop);
  return {
    schema,
    drop: async () => {
      forget();
      await drop();
    },
  };
}

async function createDatabase(kind) {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(path.join(tmpdir(), 'hookline-bench-'));
    const drop = async () => rmSync(dir, { recursive: true, force: true });
    const forget = onCleanup(drop);
    return {
      url: `sqlite:${path.join(dir, 'hookline.db')}`,
      drop: async () => {
        forget();
        await drop();
      },
    };
  }
  const { schema, drop } = await createSchema('hookline_bench');
  return { url: `${PG_URL}?options=${encodeURIComponent(`-c search_path=${schema}`)}`, drop };
}

/**
 * A hookline installation on a fresh database: migrated, with a producer key and a tenant key for
 * tenant `acme`. `env` adds HOOKLINE_* variables for every process of this installation. With
 * `api: 'embedded'` (`serve`) or `api: 'no-worker'` (`serve --no-worker`) the API process is started
 * alongside the key commands and is ready as `hl.api`.
 */
export async function createHookline(kind, env = {}, { api } = {}) {
  const db = await createDatabase(kind);
  const baseEnv = {
    HOOKLINE_DATABASE_URL: db.url,
    HOOKLINE_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    HOOKLINE_ALLOW_PRIVATE_NETWORKS: 'true',
    HOOKLINE_LOG_LEVEL: 'warn',
    HOOKLINE_HOST: '127.0.0.1',
    HOOKLINE_WORKER_ADMIN_PORT: '0',
    HOOKLINE_TENANT_RATE_LIMIT: '0',
    ...env,
  };
  const children = [];
  const hl = {
    kind,
    /** `hookline serve` (or `serve --no-worker`), resolved once GET /readyz answers 200. */
    async serve({ worker = true } = {}) {
      const port = await freePort();
      const args = worker ? ['serve'] : ['serve', '--no-worker'];
      const child = spawnHookline(args, { ...baseEnv, HOOKLINE_PORT: String(port) });
      children.push(child);
      child.origin = `http://127.0.0.1:${port}`;
      await waitHttpOk(`${child.origin}/readyz`, { child });
      return child;
    },
    /**
     * `hookline worker`, returned at once (spawn time is when a timed drain starts); `ready()` waits
     * for GET /readyz on its admin port.
     */
    async worker() {
      const port = await freePort();
      const child = spawnHookline(['worker'], { ...baseEnv, HOOKLINE_WORKER_ADMIN_PORT: String(port) });
      children.push(child);
      child.origin = `http://127.0.0.1:${port}`;
      child.ready = () => waitHttpOk(`${child.origin}/readyz`, { child });
      return child;
    },
    async close() {
      await Promise.all(children.map((c) => stop(c, 500)));
      await db.drop();
    },
  };
  try {
    await runHookline(['migrate'], baseEnv);
    // The schema is current now, so the key commands and the API process can start together.
    const [producerKey, tenantKey, apiChild] = await Promise.all([
      runHookline(['keys', 'create', '--role', 'producer'], baseEnv),
      runHookline(['keys', 'create', '--role', 'tenant', '--tenant', 'acme'], baseEnv),
      api ? hl.serve({ worker: api === 'embedded' }) : null,
    ]);
    return Object.assign(hl, { producerKey, tenantKey, api: apiChild });
  } catch (err) {
    await hl.close();
    throw err;
  }
}

/** Creates one endpoint per URL (POST /v1/webhooks, all event types), `parallel` at a time. */
export async function createEndpoints(origin, tenantKey, urls, parallel = 16) {
  const ids = new Array(urls.length);
  let next = 0;
  const one = async () => {
    while (next < urls.length) {
      const i = next++;
      const res = await fetch(`${origin}/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenantKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: urls[i], events: ['*'] }),
      });
      const body = await res.json();
      if (res.status !== 201)
        throw new Error(`POST /v1/webhooks answered ${res.status}: ${JSON.stringify(body)}`);
      ids[i] = body.id;
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, urls.length) }, one));
  return ids;
}

/** Reads hookline_queue_depth from a process's /metrics (not part of the contract: null if absent). */
export async function queueDepth(origin) {
  try {
    const res = await fetch(`${origin}/metrics`, { signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    const depth = {};
    for (const m of text.matchAll(/^hookline_queue_depth\{state="(\w+)"\} (\d+)/gm))
      depth[m[1]] = Number(m[2]);
    return Object.keys(depth).length ? depth : null;
  } catch {
    return null;
  }
}
