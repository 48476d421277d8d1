// A database that cannot serve a request for now (another session holds the lock the request needs
// past the lock timeout, or SQLite's busy timeout) is not a bug in hookline nor the caller's fault:
// the API answers 503 `database_unavailable` with Retry-After, and the same request succeeds once the
// lock is gone (docs/errors.md).
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { PgDb } from '../../src/store/postgres/pg-db.js';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';
import { startTestService, type TestService } from '../helpers/service.js';

const NEW_ENDPOINT = { url: 'https://hooks.example.com/in', events: ['user.*'] };

describe.each(STORE_KINDS)('a database busy past its timeout, on %s', (kind) => {
  let t: TestService;
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
    await t.close();
  });

  /** Another session holds the write lock of `endpoints` (PostgreSQL) or of the whole file (SQLite). */
  async function holdWriteLock(): Promise<() => Promise<void>> {
    if (kind === 'postgres') {
      const admin = new pg.Client({ connectionString: PG_URL });
      await admin.connect();
      await admin.query('BEGIN');
      await admin.query(`LOCK TABLE ${t.database.schema}.endpoints IN SHARE MODE`);
      return async () => {
        await admin.query('ROLLBACK');
        await admin.end();
      };
    }
    const other = new Database(t.database.url.slice('sqlite:'.length));
    other.exec('BEGIN IMMEDIATE');
    return async () => {
      other.exec('ROLLBACK');
      other.close();
    };
  }

  it('answers 503 database_unavailable with Retry-After, and the retry succeeds', async () => {
    t = await startTestService(kind, {
      // A short lock timeout on PostgreSQL; SQLite waits its own busy timeout (5 s).
      openDb: (database) =>
        kind === 'postgres'
          ? new PgDb({ connectionString: `${PG_URL}?lock_timeout=200`, schema: database.schema! })
          : database.open(),
    });
    const release = await holdWriteLock();
    cleanup.push(release);
    const busy = await t.call('POST', '/v1/webhooks', t.keys.tenant, NEW_ENDPOINT);
    expect(busy.statusCode).toBe(503);
    expect(busy.headers['retry-after']).toBe('1');
    expect(busy.json()).toEqual({
      error: { code: 'database_unavailable', message: 'the database is busy or unreachable; retry shortly' },
    });
    await release();
    cleanup.pop();
    const retried = await t.call('POST', '/v1/webhooks', t.keys.tenant, NEW_ENDPOINT);
    expect(retried.statusCode).toBe(201);
    const list = await t.call('GET', '/v1/webhooks', t.keys.tenant);
    expect(list.json().data).toHaveLength(1);
  }, 20_000);
});
