// The behaviour suites run on both stores. SQLite always; PostgreSQL when reachable, and mandatory in
// CI (CI=true), where an unreachable database fails the run instead of skipping quietly.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Db } from '../../src/store/db.js';
import { PgDb } from '../../src/store/postgres/pg-db.js';
import { SqliteDb } from '../../src/store/sqlite/sqlite-db.js';

export type StoreKind = 'sqlite' | 'postgres';

export const PG_URL = process.env.HOOKLINE_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REQUIRE_PG = process.env.CI === 'true' || process.env.HOOKLINE_TEST_POSTGRES === 'required';

async function postgresReachable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch (err) {
    if (REQUIRE_PG)
      throw new Error(`PostgreSQL at ${PG_URL} is required in CI but unreachable: ${String(err)}`);
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

let reachable: Promise<boolean> | null = null;

/** Store kinds to run against; prints a visible notice when PostgreSQL is skipped. */
export async function storeKinds(): Promise<StoreKind[]> {
  reachable ??= postgresReachable();
  if (await reachable) return ['sqlite', 'postgres'];
  console.warn(
    `\n  NOTICE: PostgreSQL at ${PG_URL} is unreachable; PostgreSQL runs are SKIPPED (they are mandatory with CI=true)\n`,
  );
  return ['sqlite'];
}

/** Top-level await in a test file: `describe.each(STORE_KINDS)`. */
export const STORE_KINDS: StoreKind[] = await storeKinds();

export interface TestDatabase {
  kind: StoreKind;
  /** HOOKLINE_DATABASE_URL for a process using this database. */
  url: string;
  /** Directory for SQLite files (and anything else the test writes). */
  dir: string;
  /** Only for PostgreSQL. */
  schema: string | null;
  open(): Db;
  drop(): Promise<void>;
}

/** A fresh database: a new SQLite file, or a new PostgreSQL schema. */
export async function createTestDatabase(kind: StoreKind): Promise<TestDatabase> {
  const dir = mkdtempSync(path.join(tmpdir(), 'hookline-test-'));
  if (kind === 'sqlite') {
    const file = path.join(dir, 'hookline.db');
    return {
      kind,
      url: `sqlite:${file}`,
      dir,
      schema: null,
      open: () => new SqliteDb(file),
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const url = `${PG_URL}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  return {
    kind,
    url,
    dir,
    schema,
    open: () => new PgDb({ connectionString: PG_URL, schema }),
    drop: async () => {
      rmSync(dir, { recursive: true, force: true });
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.end();
    },
  };
}

/** A plain connection listening on a PostgreSQL installation's wake-up channel (store/work-signal.ts). */
export interface WakeUpListener {
  /** The channel's name: outside the public schema it carries the schema (store/postgres/pg-db.ts). */
  channel: string;
  /** Every payload heard, in order, from any process of the installation. */
  payloads: string[];
  client: pg.Client;
  close(): Promise<void>;
}

export async function listenForWakeUps(database: TestDatabase): Promise<WakeUpListener> {
  const channel = `hookline_work:${database.schema}`;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  const payloads: string[] = [];
  client.on('notification', (n) => payloads.push(n.payload ?? ''));
  await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
  return { channel, payloads, client, close: () => client.end() };
}
