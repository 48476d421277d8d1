// Endpoint transitions racing each other (patch, delete, restore, rotate-secret, the engine's disable),
// on both stores: each decides on the row as it is when it writes, never on an earlier read
// (docs/security.md, "Threats and the tests that cover them").
import type { LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Db, Queryable, SqlValue } from '../../src/store/db.js';
import { lockQueues } from '../../src/store/endpoint-queues.js';
import { disableEndpoint, disableEndpoints } from '../../src/store/endpoints.js';
import { eventually } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { queueOf } from '../delivery/support.js';
import { createEndpoint, expectEndpoint, expectError, expectSecretShape, storedSecrets } from './support.js';

/** The read every transition starts from: the endpoint row by id and tenant, locked or not. */
const ENDPOINT_READ = /^SELECT \* FROM endpoints WHERE id = \$1 AND tenant_id = \$2\b/;

/**
 * Runs `first`, and `second` at first's first read of the endpoint row. After a read outside a
 * transaction anything may happen, so there `second` runs to completion before `first` goes on: the
 * worst interleaving of a read-then-write, every time. A read inside a transaction should hold the row
 * until it commits: there `second` starts, and `first` goes on only once `second` has read the row too
 * (it was not held) or waits for a lock `first` holds (PostgreSQL). On SQLite `first` goes on at once:
 * its write transaction holds off every other statement of the connection.
 */
async function interleave<A, B>(
  t: TestService,
  first: () => Promise<A>,
  second: () => Promise<B>,
): Promise<[A, B]> {
  const ctx = t.service.ctx as { db: Db };
  const db = ctx.db;
  let fired = false;
  let secondRead = false;
  let started: Promise<B> | undefined;
  const hook = async (sql: string, q: Queryable, inTransaction: boolean) => {
    if (!ENDPOINT_READ.test(sql)) return;
    if (fired) return void (secondRead = true);
    fired = true;
    started = second();
    if (!inTransaction) return void (await started);
    if (q.dialect !== 'postgres') return;
    const { pid } = (await q.one<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!;
    await eventually(async () => {
      if (secondRead) return true;
      const waiting = await db.one<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))',
        [pid],
      );
      return waiting!.n > 0;
    }, 10_000);
  };
  const wrap = (q: Queryable, inTransaction: boolean): Queryable => ({
    dialect: q.dialect,
    capabilities: q.capabilities,
    all: async <T>(sql: string, params?: readonly SqlValue[]) => {
      const rows = await q.all<T>(sql, params);
      await hook(sql, q, inTransaction);
      return rows;
    },
    one: async <T>(sql: string, params?: readonly SqlValue[]) => {
      const row = await q.one<T>(sql, params);
      await hook(sql, q, inTransaction);
      return row;
    },
    run: (sql, params) => q.run(sql, params),
  });
  const wrapped: Db = {
    ...wrap(db, false),
    ...(db.notifications ? { notifications: db.notifications } : {}),
    transaction: (fn) => db.transaction((tx) => fn(wrap(tx, true))),
    ping: () => db.ping(),
    close: () => db.close(),
    startMaintenance: () => null,
    threadShare: () => db.threadShare(),
    threadExited: (id: number) => db.threadExited(id),
    forWorkers: () => wrapped,
  };
  ctx.db = wrapped;
  try {
    const a = await first();
    if (!started) throw new Error('the first call never read the endpoint');
    return [a, await started];
  } finally {
    ctx.db = db;
  }
}

describe.each(STORE_KINDS)('endpoint transitions racing each other on %s', (kind) => {
  let t: TestService;
  beforeEach(async () => {
    t = await startTestService(kind);
  });
  afterEach(async () => t.close());

  const call = (method: string, id: string, suffix = '', body?: unknown) =>
    t.call(method, `/v1/webhooks/${id}${suffix}`, t.keys.tenant, body);
  const statusOf = async (id: string) => expectEndpoint(await call('GET', id)).status;

  it.each([
    ['a re-enable', { status: 'active' }],
    ['a change of description', { description: 'changed' }],
  ])('%s racing a DELETE never brings the deleted endpoint back', async (_, patch) => {
    const { id } = await createEndpoint(t);
    // Disabled as the delivery engine does after a 410, so the PATCH has something to re-enable.
    expect(await disableEndpoint(t.service.ctx.db, id, 'the endpoint answered 410 Gone', Date.now())).toBe(
      true,
    );

    const [patched, deleted] = await interleave(
      t,
      () => call('PATCH', id, '', patch),
      () => call('DELETE', id),
    );

    expect(expectEndpoint(deleted).status).toBe('deleted');
    expectError(patched, 409, 'endpoint_deleted');
    const view = expectEndpoint(await call('GET', id));
    expect(view).toMatchObject({ status: 'deleted', description: '' });
    expect(await queueOf(t, id)).toMatchObject({ active: 0, queued: 0 });
  });

  it('many re-enables and deletes at once: every endpoint ends deleted, its queue stopped', async () => {
    const ids = await Promise.all(Array.from({ length: 12 }, async () => (await createEndpoint(t)).id));
    for (const id of ids)
      await disableEndpoint(t.service.ctx.db, id, 'the endpoint answered 410 Gone', Date.now());

    const answers = await Promise.all(
      ids.flatMap((id) => [call('PATCH', id, '', { status: 'active' }), call('DELETE', id)]),
    );

    for (const res of answers) {
      if (res.statusCode === 409) expectError(res, 409, 'endpoint_deleted');
      else expect(res.statusCode, res.body).toBe(200);
    }
    for (const id of ids) {
      expect(await statusOf(id)).toBe('deleted');
      expect(await queueOf(t, id)).toMatchObject({ active: 0 });
    }
  });

  it('two rotations at once with a grace period: both secrets sign deliveries', async () => {
    const { id, signing_secret: original } = await createEndpoint(t);
    const rotate = () => call('POST', id, '/rotate-secret', { grace_period_seconds: 3600 });

    const [a, b] = await interleave(t, rotate, rotate);

    const returned = [a, b].map((res) => {
      expect(res.statusCode, res.body).toBe(200);
      const { signing_secret } = res.json<{ signing_secret: string }>();
      expectSecretShape(signing_secret);
      return signing_secret;
    });
    // Whichever came second kept the first one's as its previous: neither caller holds a dead secret.
    expect((await storedSecrets(t, id)).sort()).toEqual([...returned].sort());
    expect(await storedSecrets(t, id)).not.toContain(original);
  });

  it('many rotations at once: the stored secrets are the last two returned, never more', async () => {
    const { id, signing_secret: original } = await createEndpoint(t);

    const answers = await Promise.all(
      Array.from({ length: 8 }, () => call('POST', id, '/rotate-secret', { grace_period_seconds: 3600 })),
    );

    const returned = answers.map((res: LightMyRequestResponse) => {
      expect(res.statusCode, res.body).toBe(200);
      return res.json<{ signing_secret: string }>().signing_secret;
    });
    expect(new Set(returned).size).toBe(returned.length);
    const stored = await storedSecrets(t, id);
    // Rotations in some order, each keeping the one it replaced: current and previous are the last two
    // of that order, and the original (which only the first replaced) is long gone.
    expect(stored).toHaveLength(2);
    for (const secret of stored) expect(returned).toContain(secret);
    expect(stored).not.toContain(original);
  });

  it('two restores at once: one restores, the other answers 409 endpoint_not_deleted', async () => {
    const { id } = await createEndpoint(t);
    expect((await call('DELETE', id)).statusCode).toBe(200);

    const [a, b] = await interleave(
      t,
      () => call('POST', id, '/restore'),
      () => call('POST', id, '/restore'),
    );

    const [ok, refused] = a.statusCode === 200 ? [a, b] : [b, a];
    expect(expectEndpoint(ok).status).toBe('active');
    expectError(refused, 409, 'endpoint_not_deleted');
    expect(await queueOf(t, id)).toMatchObject({ active: 1 });
  });

  it('two deletes at once: both answer the one deletion, its time unchanged', async () => {
    const { id } = await createEndpoint(t);
    let now = Date.now();
    (t.service.ctx as { clock: () => number }).clock = () => (now += 1000);

    const [a, b] = await interleave(
      t,
      () => call('DELETE', id),
      () => call('DELETE', id),
    );

    expect(expectEndpoint(a).status).toBe('deleted');
    expect(expectEndpoint(b)).toEqual(expectEndpoint(a));
  });

  it("the engine's disable arriving while an endpoint is deleted leaves it deleted", async () => {
    const { id } = await createEndpoint(t);
    const db = t.service.ctx.db;
    // As the outcome writer records a 410 from an attempt that was in flight: queue row first.
    const engineDisable = () =>
      db.transaction(async (tx) => {
        await lockQueues(tx, [id]);
        return disableEndpoints(tx, [id], 'the endpoint answered 410 Gone', Date.now());
      });

    const [deleted] = await interleave(t, () => call('DELETE', id), engineDisable);

    expect(expectEndpoint(deleted).status).toBe('deleted');
    expect(await statusOf(id)).toBe('deleted');
    // Were it "disabled" now, a PATCH could re-enable what the tenant deleted.
    expectError(await call('PATCH', id, '', { status: 'active' }), 409, 'endpoint_deleted');
    expect(await queueOf(t, id)).toMatchObject({ active: 0 });
  });
});
