// Drives hookline through its public surface only: the CLI (migrate, keys create, serve, worker),
// HOOKLINE_* variables and the HTTP API. Each instance gets a fresh database — a SQLite file in a
// temporary directory, or a PostgreSQL schema selected through `options=-c search_path=…` in the URL
// (which hookline's pg connection honours) — removed when the instance closes.
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { URLSearchParams } from 'node:url';
import pg from 'pg';
import { freePort, onCleanup, runHookline, spawnHookline, stop, waitHttpOk } from './processes.js';

export const PG_URL = process.env.HOOKLINE_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * PG_URL with `params` added to its query string. Cases tag their connections with
 * `application_name` = their schema, so the backends serving them can be told apart in
 * pg_stat_activity (lib/window.js).
 */
export function pgUrlWith(params) {
  return `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}${new URLSearchParams(params)}`;
}

async function pgQuery(sql) {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * The PostgreSQL server the cases ran on, for the run's notes: its version and the settings that move
 * its CPU and WAL per delivery. `autovacuum` above all: off, no table is vacuumed but those hookline's
 * workers vacuum themselves (docs/scaling.md, "Vacuum"), and graphile-worker's are not. Null when
 * the server cannot be reached.
 */
export async function postgresServer() {
  try {
    const { rows } = await pgQuery(
      `SELECT split_part(current_setting('server_version'), ' ', 1) AS version, name,
         current_setting(name) AS setting
       FROM pg_settings WHERE name IN ('autovacuum', 'synchronous_commit', 'shared_buffers', 'fsync') ORDER BY name`,
    );
    const settings = rows.map((r) => `${r.name} ${r.setting}`).join(', ');
    return `PostgreSQL ${rows[0]?.version ?? '?'} at ${new URL(PG_URL).host}: ${settings}`;
  } catch {
    return null;
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

function tempDir() {
  const dir = mkdtempSync(path.join(tmpdir(), 'hookline-bench-'));
  const drop = async () => rmSync(dir, { recursive: true, force: true });
  const forget = onCleanup(drop);
  return {
    dir,
    drop: async () => {
      forget();
      await drop();
    },
  };
}

/** `hookline migrate`; then `keys`, a promise of a producer key and a tenant key for `acme`. */
async function migrate(env) {
  await runHookline(['migrate'], env);
  const keys = Promise.all([
    runHookline(['keys', 'create', '--role', 'producer'], env),
    runHookline(['keys', 'create', '--role', 'tenant', '--tenant', 'acme'], env),
  ]).then(([producerKey, tenantKey]) => ({ producerKey, tenantKey }));
  return { keys };
}

/**
 * SQLite installations start from one template per run: `hookline migrate` and the two `keys create`
 * run once into a file that every case then copies (closed, so the copy is a consistent database).
 * That saves a CLI start-up per case; the keys and the encryption key are shared by all copies.
 */
let sqliteTemplate = null;
function sqliteFromTemplate(baseEnv) {
  sqliteTemplate ??= (async () => {
    const { dir } = tempDir();
    const file = path.join(dir, 'template.db');
    const encryptionKey = randomBytes(32).toString('base64');
    const env = {
      ...baseEnv,
      HOOKLINE_DATABASE_URL: `sqlite:${file}`,
      HOOKLINE_ENCRYPTION_KEY: encryptionKey,
    };
    const { keys } = await migrate(env);
    return { file, encryptionKey, keys: await keys };
  })();
  return sqliteTemplate;
}

/**
 * A fresh database: a copy of the SQLite template, or a new PostgreSQL schema, migrated; `keys` is
 * a promise of its API keys (on PostgreSQL the key commands may still be running).
 */
async function createDatabase(kind, baseEnv) {
  if (kind === 'sqlite') {
    const template = await sqliteFromTemplate(baseEnv);
    const { dir, drop } = tempDir();
    const file = path.join(dir, 'hookline.db');
    copyFileSync(template.file, file);
    if (existsSync(`${template.file}-wal`)) copyFileSync(`${template.file}-wal`, `${file}-wal`);
    return { ...template, keys: Promise.resolve(template.keys), url: `sqlite:${file}`, drop };
  }
  const { schema, drop } = await createSchema('hookline_bench');
  const url = pgUrlWith({ options: `-c search_path=${schema}`, application_name: schema });
  const encryptionKey = randomBytes(32).toString('base64');
  try {
    const { keys } = await migrate({
      ...baseEnv,
      HOOKLINE_DATABASE_URL: url,
      HOOKLINE_ENCRYPTION_KEY: encryptionKey,
    });
    return { url, encryptionKey, drop, keys, schema };
  } catch (err) {
    await drop();
    throw err;
  }
}

/**
 * A hookline installation on a fresh database: migrated, with a producer key and a tenant key for
 * tenant `acme` (`hl.producerKey`, `hl.tenantKey`). `env` adds HOOKLINE_* variables for every
 * process of this installation. With `api: 'embedded'` (`serve`) or `api: 'no-worker'`
 * (`serve --no-worker`) the API process is started and ready as `hl.api`.
 */
export async function createHookline(kind, env = {}, { api } = {}) {
  const common = {
    HOOKLINE_ALLOW_PRIVATE_NETWORKS: 'true',
    HOOKLINE_LOG_LEVEL: 'warn',
    HOOKLINE_HOST: '127.0.0.1',
    HOOKLINE_WORKER_ADMIN_PORT: '0',
    HOOKLINE_TENANT_RATE_LIMIT: '0',
  };
  const db = await createDatabase(kind, common);
  const baseEnv = {
    ...common,
    HOOKLINE_DATABASE_URL: db.url,
    HOOKLINE_ENCRYPTION_KEY: db.encryptionKey,
    ...env,
  };
  const children = [];
  const hl = {
    kind,
    /** On PostgreSQL, the application_name of every connection of this installation. */
    app: db.schema ?? null,
    /** Pids of the hookline processes running now (API and workers). */
    pids: () => children.filter((c) => c.exitCode === null && c.signalCode === null).map((c) => c.pid),
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
    /** A new API key of `role` (`hookline keys create`), e.g. an instance manager's for admin routes. */
    createKey: (role) => runHookline(['keys', 'create', '--role', role], baseEnv),
    async close() {
      // Nothing to finish (results are in), unless a profile is to be written on exit (BENCH_CPU_PROF).
      await Promise.all(children.map((c) => stop(c, process.env.BENCH_CPU_PROF ? 5000 : 0)));
      await db.drop();
    },
  };
  try {
    // The schema is migrated: the key commands and the API process run side by side.
    const [keys, apiChild] = await Promise.all([
      db.keys,
      api ? hl.serve({ worker: api === 'embedded' }) : null,
    ]);
    return Object.assign(hl, keys, { api: apiChild });
  } catch (err) {
    await hl.close();
    throw err;
  }
}

/** Creates one endpoint per URL (POST /v1/webhooks, all event types, `fields` added), `parallel` at a time. */
export async function createEndpoints(origin, tenantKey, urls, parallel = 32, fields = {}) {
  const ids = new Array(urls.length);
  let next = 0;
  const one = async () => {
    while (next < urls.length) {
      const i = next++;
      const res = await fetch(`${origin}/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${tenantKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: urls[i], events: ['*'], ...fields }),
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
