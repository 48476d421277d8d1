// One slow or dead endpoint must not delay deliveries to healthy ones (docs/contract.md §6): in-flight attempts
// are bounded per endpoint, there is no head-of-line blocking, and the worker does not spin while the
// only due work belongs to an endpoint that is at its cap.
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import type { Queryable } from '../../src/store/db.js';
import {
  createEndpoint,
  deliveriesTo,
  emit,
  queueOf,
  sleep,
  startRawServer,
  type RawServer,
} from './support.js';

/**
 * Counts the worker's claims (each reads the ready endpoint queues) by wrapping the service's own
 * database handle, inside transactions too.
 */
function countClaims(t: TestService): { readonly count: number } {
  const db = t.service.ctx.db;
  const counter = { count: 0 };
  const counted = <Q extends Pick<Queryable, 'all'>>(q: Q): Q['all'] => {
    const all = q.all.bind(q);
    return ((sql: string, params?: readonly never[]) => {
      if (sql.includes('WHERE ready_at <=')) counter.count += 1;
      return all(sql, params);
    }) as Q['all'];
  };
  db.all = counted(db);
  const transaction = db.transaction.bind(db);
  db.transaction = ((fn: (tx: Queryable) => Promise<unknown>) =>
    transaction((tx) =>
      fn({ ...tx, dialect: tx.dialect, capabilities: tx.capabilities, all: counted(tx) }),
    )) as typeof db.transaction;
  return counter;
}

describe.each(STORE_KINDS)('endpoint isolation on %s', (kind) => {
  let t: TestService | undefined;
  const closers: (Receiver | RawServer)[] = [];
  afterEach(async () => {
    // Subscribers first, so attempts still hanging end at once instead of waiting out the grace.
    await Promise.all(closers.splice(0).map((c) => c.close()));
    await t?.close();
    t = undefined;
  });

  it('a subscriber that never answers does not delay a healthy endpoint of the same tenant', async () => {
    t = await startTestService(kind, {
      worker: true,
      env: { HOOKLINE_DELIVERY_TIMEOUT_MS: '10000', HOOKLINE_ENDPOINT_CONCURRENCY: '2' },
    });
    const hanging = await startReceiver(() => ({ hang: true }));
    const healthy = await startReceiver();
    closers.push(hanging, healthy);
    const stuck = await createEndpoint(t, { url: hanging.url, events: ['user.*'] });
    const good = await createEndpoint(t, { url: healthy.url, events: ['user.*'] });
    const claims = countClaims(t);

    const started = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push(await emit(t, 'user.updated', { userId: `user_${i}`, i }));
    await healthy.waitFor(30, 8000);
    const elapsed = Date.now() - started;
    console.info(`[${kind}] 30 deliveries to the healthy endpoint beside a hanging one: ${elapsed} ms`);

    // Well inside the hanging endpoint's 10 s time-out (waitFor gave up after 8 s otherwise); its
    // attempts are checked to be still in flight below.
    expect(new Set(healthy.requests.map((r) => r.headers['hook-id']))).toEqual(new Set(ids));
    await eventually(async () => {
      const rows = await deliveriesTo(t!, good.id);
      return rows.length === 30 && rows.every((r) => r.status === 'succeeded');
    });
    // The hanging endpoint holds at most its cap of attempts; the rest of its backlog waits.
    await sleep(300);
    expect(hanging.requests).toHaveLength(2);
    const stuckRows = await deliveriesTo(t, stuck.id);
    expect(stuckRows.filter((r) => r.status === 'delivering')).toHaveLength(2);
    expect(stuckRows.filter((r) => r.status === 'pending')).toHaveLength(28);

    // While only the capped endpoint has due work the worker sleeps until a slot frees (or a poll
    // interval of 50 ms passes) instead of re-claiming in a tight loop.
    const before = claims.count;
    await sleep(1000);
    const perSecond = claims.count - before;
    console.info(`[${kind}] claims per second while only a saturated endpoint has due work: ${perSecond}`);
    // About 20 with the 50 ms poll; NOTIFYs of other suites sharing the PostgreSQL database add some.
    // A spinning loop does hundreds.
    expect(perSecond).toBeLessThan(150);
  });

  it('a slow endpoint never has more attempts in flight than HOOKLINE_ENDPOINT_CONCURRENCY', async () => {
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_ENDPOINT_CONCURRENCY: '2' } });
    // Uneven answer times, so attempts end one at a time while others are still running.
    let n = 0;
    const slow = await startRawServer((req, res) => {
      const delay = [40, 130, 90][n++ % 3]!;
      req.resume();
      req.on('end', () => setTimeout(() => res.writeHead(200).end(), delay));
    });
    closers.push(slow);
    const endpoint = await createEndpoint(t, { url: slow.url, events: ['*'] });
    for (let i = 0; i < 10; i++) await emit(t, 'organization.updated', { i });
    await eventually(async () => {
      const rows = await deliveriesTo(t!, endpoint.id);
      return rows.length === 10 && rows.every((r) => r.status === 'succeeded');
    }, 10_000);
    expect(slow.requests).toBe(10);
    expect(slow.maxConcurrent).toBe(2);
  });

  it('a disabled endpoint with due deliveries does not keep the worker busy', async () => {
    t = await startTestService(kind, { worker: true });
    const gone = await startReceiver(() => ({ status: 410 }));
    closers.push(gone);
    const endpoint = await createEndpoint(t, { url: gone.url, events: ['*'] });
    await emit(t, 'user.deleted', { userId: 'user_1' });
    // Disabled: its delivery waits (pending) in a stopped queue that no claim reads.
    await eventually(async () => {
      const [row] = await deliveriesTo(t!, endpoint.id);
      return (
        row?.status === 'pending' && row.attempts === 1 && (await queueOf(t!, endpoint.id))?.active === 0
      );
    });
    const claims = countClaims(t);
    await sleep(1000);
    console.info(
      `[${kind}] claims per second with only a disabled endpoint's delivery pending: ${claims.count}`,
    );
    expect(claims.count).toBeLessThan(150);
  });
});
