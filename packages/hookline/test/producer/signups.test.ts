// The promise of emitting inside the product's transaction, under load and a crash: 1,000 sign-ups
// from 8 product connections, ~30 % rolled back after their emit, the product process SIGKILLed
// mid-run with transactions open, then the run finished. The users that committed and the
// user.created deliveries are the same set — none lost, none phantom — and each user's two keyed
// events arrive in order. hookline runs as its own processes (`serve` and `worker`) with its tables in
// a schema of their own (`?schema=`, created by `hookline migrate`), the product's tables beside it.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createApiKeys, postJson, runCli, startProcess } from '../helpers/process.js';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { testEnv, TEST_ENCRYPTION_KEY } from '../helpers/service.js';
import { PG_URL, STORE_KINDS, createTestDatabase } from '../helpers/stores.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'signup-child.ts');
const SIGNUPS = 1000;

interface Child {
  progress: () => number;
  exited: Promise<number | null>;
  kill: (signal: NodeJS.Signals) => void;
  output: () => string;
}

function startChild(env: Record<string, string>): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    progress: () => Math.max(0, ...[...output.matchAll(/progress (\d+)/g)].map((m) => Number(m[1]))),
    exited,
    kill: (signal) => child.kill(signal),
    output: () => output,
  };
}

describe.runIf(STORE_KINDS.includes('postgres'))('sign-ups emitting inside their transaction', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  it('delivers user.created for exactly the committed users, through a SIGKILL of the product', async () => {
    const database = await createTestDatabase('postgres');
    cleanup.push(() => database.drop());
    const productSchema = database.schema!;
    const hooklineSchema = `${productSchema}_hl`;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    cleanup.push(async () => {
      await admin.query(`DROP SCHEMA IF EXISTS "${hooklineSchema}" CASCADE`);
      await admin.end();
    });
    await admin.query(`CREATE TABLE "${productSchema}".users (id TEXT PRIMARY KEY, email TEXT NOT NULL)`);

    // hookline's processes in their own schema, which migrate creates.
    const env = testEnv(database, {
      HOOKLINE_DATABASE_URL: `${PG_URL}?schema=${hooklineSchema}`,
      HOOKLINE_MAX_RETRIES: '20',
    });
    const migrated = await runCli(['migrate'], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    const tables = await admin.query(
      `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'messages'`,
      [hooklineSchema],
    );
    expect(tables.rows[0].n).toBe(1);
    const { tenantKey } = await createApiKeys(env);
    const receiver = await startReceiver(() => ({ status: 204 }));
    cleanup.push(() => receiver.close());
    const serve = await startProcess(['serve'], env);
    cleanup.push(() => serve.kill());
    const worker = await startProcess(['worker'], env);
    cleanup.push(() => worker.kill());
    const created = await postJson(serve.address, '/v1/webhooks', tenantKey, {
      url: receiver.url,
      events: ['user.created', 'user.updated'],
    });
    expect(created.status).toBe(201);

    const childEnv = {
      SIGNUP_DATABASE_URL: PG_URL,
      SIGNUP_PRODUCT_SCHEMA: productSchema,
      SIGNUP_HOOKLINE_SCHEMA: hooklineSchema,
      HOOKLINE_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      SIGNUP_FROM: '0',
      SIGNUP_TO: String(SIGNUPS),
    };
    // The product, killed once it is well into the run: its open transactions die with it.
    const first = startChild(childEnv);
    cleanup.push(async () => first.kill('SIGKILL'));
    await eventually(() => first.progress() >= 200 || first.output().includes('finished'), 120_000);
    first.kill('SIGKILL');
    expect(await first.exited).toBeNull();
    expect(first.output()).not.toContain('finished');
    const before = await admin.query(`SELECT count(*)::int AS n FROM "${productSchema}".users`);
    expect(before.rows[0].n).toBeLessThan(SIGNUPS * 0.7);

    // Restarted, it finishes the run (sign-ups already committed are skipped).
    const second = startChild(childEnv);
    cleanup.push(async () => second.kill('SIGKILL'));
    expect(await second.exited, second.output()).toBe(0);

    const users = new Set(
      (await admin.query<{ id: string }>(`SELECT id FROM "${productSchema}".users`)).rows.map((r) => r.id),
    );
    // ~70 % committed.
    expect(users.size).toBeGreaterThan(SIGNUPS * 0.6);
    expect(users.size).toBeLessThan(SIGNUPS * 0.8);

    // Deliveries are at least once: the same hook-id may come twice; its first arrival counts.
    const firstArrivals = () => {
      const seen = new Map<string, { type: string; userId: string; index: number }>();
      receiver.requests.forEach((r, index) => {
        const id = String(r.headers['hook-id']);
        if (seen.has(id)) return;
        const body = JSON.parse(r.body) as { type: string; data: { userId: string } };
        seen.set(id, { type: body.type, userId: body.data.userId, index });
      });
      return [...seen.values()];
    };
    await eventually(() => firstArrivals().length >= 2 * users.size, 180_000);
    const arrivals = firstArrivals();
    const createdFor = arrivals.filter((a) => a.type === 'user.created').map((a) => a.userId);
    const updatedFor = arrivals.filter((a) => a.type === 'user.updated').map((a) => a.userId);
    // 0 lost, 0 phantom: the delivered users are the committed users, each once.
    expect(createdFor.length).toBe(users.size);
    expect(new Set(createdFor)).toEqual(users);
    expect(new Set(updatedFor)).toEqual(users);
    // hookline's own table agrees: no message of a rolled-back sign-up was ever written.
    const messages = await admin.query(
      `SELECT count(*)::int AS n FROM "${hooklineSchema}".messages WHERE event_type = 'user.created'`,
    );
    expect(messages.rows[0].n).toBe(users.size);
    // Keyed pairs in order: each user's user.created arrived before its user.updated.
    const firstIndex = new Map<string, number>();
    for (const a of arrivals) if (a.type === 'user.created') firstIndex.set(a.userId, a.index);
    for (const a of arrivals) {
      if (a.type === 'user.updated') expect(a.index).toBeGreaterThan(firstIndex.get(a.userId)!);
    }
  }, 420_000);
});
