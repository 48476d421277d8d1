// The limits every PostgreSQL session of hookline carries, and what happens when the server uses them:
// a stalled transaction's session is ended and its work runs again on a fresh connection; a statement
// stuck behind another session's lock gives up. (SQLite has no sessions: one process, one writer.)
import { randomBytes } from 'node:crypto';
import { connect, createServer, type Socket } from 'node:net';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { PgDb, SESSION_LIMITS } from '../../src/store/postgres/pg-db.js';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';

describe.runIf(STORE_KINDS.includes('postgres'))('PostgreSQL session limits', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  /** A fresh schema with one table `t (id, n)` holding row 1, and an admin connection. */
  async function setup() {
    const schema = `s_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    cleanup.push(() => admin.end());
    await admin.query(`CREATE SCHEMA ${schema}`);
    await admin.query(`CREATE TABLE ${schema}.t (id INT PRIMARY KEY, n INT NOT NULL)`);
    await admin.query(`INSERT INTO ${schema}.t VALUES (1, 0)`);
    cleanup.push(() => admin.query(`DROP SCHEMA ${schema} CASCADE`));
    const open = (params = '', max?: number) => {
      const db = new PgDb({ connectionString: `${PG_URL}${params}`, schema, ...(max ? { max } : {}) });
      cleanup.push(() => db.close());
      return db;
    };
    return { schema, admin, open };
  }

  it('gives every session the limits, and lets the database URL override them', async () => {
    const { open } = await setup();
    const show = async (db: PgDb, name: string) =>
      (await db.one<Record<string, string>>(`SHOW ${name}`))?.[name];
    const db = open();
    expect(await show(db, 'idle_in_transaction_session_timeout')).toBe(
      `${SESSION_LIMITS.idle_in_transaction_session_timeout / 1000}s`,
    );
    expect(await show(db, 'lock_timeout')).toBe(`${SESSION_LIMITS.lock_timeout / 1000}s`);
    expect(await show(db, 'statement_timeout')).toBe(`${SESSION_LIMITS.statement_timeout / 60_000}min`);
    expect(await show(open('?lock_timeout=1234'), 'lock_timeout')).toBe('1234ms');
  });

  it("commits the workers' transitions without waiting for the disk, and everything else waiting", async () => {
    const { open, schema } = await setup();
    const show = async (db: PgDb) =>
      (await db.one<{ synchronous_commit: string }>('SHOW synchronous_commit'))?.synchronous_commit;
    const db = open();
    const workers = db.forWorkers();
    expect(await show(db)).toBe('on');
    expect(await show(workers)).toBe('off');
    // The same pool every time, in the same schema, and closed with its parent.
    expect(db.forWorkers()).toBe(workers);
    expect(workers.forWorkers()).toBe(workers);
    expect(await workers.one<{ n: number }>('SELECT n FROM t WHERE id = 1')).toEqual({ n: 0 });
    expect((await workers.one<{ s: string }>('SELECT current_schema() AS s'))?.s).toBe(schema);
    await db.close();
    await expect(workers.one('SELECT 1')).rejects.toThrow();
  });

  it('runs a transaction again on a fresh connection after the server ended its stalled session', async () => {
    const { open } = await setup();
    // One connection, so the retry can only succeed if the dead one was discarded.
    const db = open('?idle_in_transaction_session_timeout=200', 1);
    let attempts = 0;
    const result = await db.transaction(async (tx) => {
      attempts++;
      await tx.run('UPDATE t SET n = n + 1 WHERE id = 1');
      // The first attempt stalls inside the transaction (as a SIGSTOPped process would): the server
      // ends the session while no query is under way, and the driver reports it as an 'error' event.
      if (attempts === 1) await new Promise((r) => setTimeout(r, 800));
      return tx.one<{ n: number }>('SELECT n FROM t WHERE id = 1');
    });
    expect(attempts).toBe(2);
    // The stalled attempt's update was rolled back with its session; only the retry's counts.
    expect(result).toEqual({ n: 1 });
    expect(await db.one('SELECT n FROM t WHERE id = 1')).toEqual({ n: 1 });
  });

  it('gives up on a lock another session holds instead of waiting for it', async () => {
    const { schema, admin, open } = await setup();
    const db = open('?lock_timeout=200');
    // The admin session takes the row and stalls (without the server's idle limit: it is the test's).
    await admin.query('BEGIN');
    await admin.query(`SELECT * FROM ${schema}.t WHERE id = 1 FOR UPDATE`);
    cleanup.push(() => admin.query('ROLLBACK'));
    await expect(db.transaction((tx) => tx.run('UPDATE t SET n = n + 1 WHERE id = 1'))).rejects.toMatchObject(
      { code: '55P03' },
    );
    await admin.query('ROLLBACK');
    expect(await db.transaction((tx) => tx.run('UPDATE t SET n = n + 1 WHERE id = 1'))).toBe(1);
  });

  it('answers a readiness ping with an error when the server stops answering', async () => {
    const { schema } = await setup();
    // A TCP relay to the server that can go silent: connections stay open, nothing comes back, as
    // with a frozen server or a network that drops packets.
    const target = new URL(PG_URL);
    let silent = false;
    const sockets = new Set<Socket>();
    const relay = createServer((client) => {
      const upstream = connect(Number(target.port || 5432), target.hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('error', () => {});
      }
      client.on('data', (d) => !silent && upstream.write(d));
      upstream.on('data', (d) => !silent && client.write(d));
    });
    await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
    cleanup.push(async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => relay.close(r));
    });
    const via = new URL(PG_URL);
    via.host = `127.0.0.1:${(relay.address() as { port: number }).port}`;
    const db = new PgDb({ connectionString: via.toString(), schema });
    cleanup.push(() => Promise.race([db.close(), new Promise((r) => setTimeout(r, 100))]));
    await db.ping(); // a pooled connection now exists
    silent = true;
    await expect(db.ping()).rejects.toThrow(/did not answer/);
  }, 20_000);
});
