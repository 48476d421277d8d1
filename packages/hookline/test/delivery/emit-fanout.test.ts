// Fan-out by the emit itself (docs/architecture.md, "Fan-out"): on SQLite an emit to a tenant with few
// endpoints writes its deliveries in the same transaction as the message; a tenant with many, and what
// a group's budget leaves over, go to the workers' chunked fan-out. PostgreSQL leaves every message to
// the workers. Either way each matching endpoint gets exactly one delivery, and a line of keyed
// messages learns of its deliveries in emit order.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EMIT_FANOUT_BUDGET, EMIT_FANOUT_ENDPOINTS, fanOutBatch } from '../../src/engine/fanout.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint } from './support.js';

const URL = 'http://127.0.0.1:9/hook';

describe.each(STORE_KINDS)('fan-out at emit on %s', (kind) => {
  let t: TestService;
  const atEmit = kind === 'sqlite';

  beforeEach(async () => {
    t = await startTestService(kind, { worker: false });
  });
  afterEach(async () => t.close());

  const fannedOut = async (id: string) =>
    (await t.service.ctx.db.one('SELECT 1 AS queued FROM fanout_queue WHERE message_id = $1', [id])) ===
    undefined;
  const deliveriesOf = (messageId: string) =>
    t.service.ctx.db.all<{ endpoint_id: string; status: string }>(
      'SELECT endpoint_id, status FROM deliveries WHERE message_id = $1 ORDER BY endpoint_id',
      [messageId],
    );
  const fanOutAll = async () => {
    while ((await fanOutBatch(t.service.ctx)).messages > 0);
  };
  const queued = async (endpointId: string) =>
    Number(
      (await t.service.ctx.db.one<{ n: number }>(
        'SELECT queued AS n FROM endpoint_queues WHERE endpoint_id = $1',
        [endpointId],
      ))!.n,
    );

  it('writes the deliveries of a tenant with few endpoints with the message, to the matching ones only', async () => {
    const users = await createEndpoint(t, { url: URL, events: ['user.*'] });
    const everything = await createEndpoint(t, { url: URL, events: ['*'] });
    await createEndpoint(t, { url: URL, events: ['organization.*'] });
    const { id } = await t.service.emitter.emit({ tenantId: 'acme', type: 'user.updated', data: {} });

    expect(await fannedOut(id)).toBe(atEmit);
    const expected = [users.id, everything.id]
      .sort()
      .map((endpoint_id) => ({ endpoint_id, status: 'pending' }));
    expect(await deliveriesOf(id)).toEqual(atEmit ? expected : []);
    await fanOutAll();
    expect(await fannedOut(id)).toBe(true);
    expect(await deliveriesOf(id)).toEqual(expected);
    expect(await queued(users.id)).toBe(1);
  });

  it.runIf(kind === 'postgres')('fan-out leaves the message row as its emit wrote it', async () => {
    // A rewrite of the message (payload included) and of its index entries per fan-out was most of
    // the write-ahead log an emit cost (migration 16): xmin, the row version's writer, tells.
    await createEndpoint(t, { url: URL, events: ['user.*'] });
    const { id } = await t.service.emitter.emit({ tenantId: 'acme', type: 'user.updated', data: {} });
    const version = async () =>
      (await t.service.ctx.db.one<{ v: string }>('SELECT xmin::text AS v FROM messages WHERE id = $1', [id]))!
        .v;
    const written = await version();
    await fanOutAll();
    expect(await fannedOut(id)).toBe(true);
    expect((await deliveriesOf(id)).length).toBe(1);
    expect(await version()).toBe(written);
  });

  it('leaves a tenant with more endpoints than an emit takes on to the workers', async () => {
    const endpoints = [];
    for (let i = 0; i <= EMIT_FANOUT_ENDPOINTS; i++)
      endpoints.push(await createEndpoint(t, { url: URL, events: ['user.*'] }));
    const { id } = await t.service.emitter.emit({ tenantId: 'acme', type: 'user.updated', data: {} });

    expect(await fannedOut(id)).toBe(false);
    expect(await deliveriesOf(id)).toEqual([]);
    await fanOutAll();
    expect((await deliveriesOf(id)).length).toBe(EMIT_FANOUT_ENDPOINTS + 1);
  });

  it('leaves what exceeds a group’s budget to the workers, and a later message of the same key behind it', async () => {
    const perMessage = 8;
    const endpoints = [];
    for (let i = 0; i < perMessage; i++)
      endpoints.push(await createEndpoint(t, { url: URL, events: ['user.*'] }));
    // One group (emits of one event-loop turn): more deliveries than the budget, the last one keyed.
    const count = EMIT_FANOUT_BUDGET / perMessage + 2;
    const group = await Promise.all(
      Array.from({ length: count }, (_, i) =>
        t.service.emitter.emit({
          tenantId: 'acme',
          type: 'user.updated',
          data: { i },
          orderingKey: i === count - 1 ? 'user_1' : null,
        }),
      ),
    );
    const later = await t.service.emitter.emit({
      tenantId: 'acme',
      type: 'user.updated',
      data: { later: true },
      orderingKey: 'user_1',
    });
    const fanned = await Promise.all(group.map((m) => fannedOut(m.id)));
    expect(fanned.filter(Boolean).length).toBe(atEmit ? EMIT_FANOUT_BUDGET / perMessage : 0);
    // Its line's earlier message awaits the workers, so the later one does too.
    expect(await fannedOut(later.id)).toBe(false);

    await fanOutAll();
    for (const m of [...group, later]) expect((await deliveriesOf(m.id)).length).toBe(perMessage);
    for (const e of endpoints) expect(await queued(e.id)).toBe(count + 1);
    // The keyed pair is in emit order at every endpoint: the first due, the second held behind it.
    expect((await deliveriesOf(group[count - 1]!.id)).map((d) => d.status)).toEqual(
      Array(perMessage).fill('pending'),
    );
    expect((await deliveriesOf(later.id)).map((d) => d.status)).toEqual(Array(perMessage).fill('held'));
  });

  it('fans out a keyed message at emit when no earlier message of its key is waiting', async () => {
    const endpoint = await createEndpoint(t, { url: URL, events: ['user.*'] });
    const first = await t.service.emitter.emit({
      tenantId: 'acme',
      type: 'user.updated',
      data: {},
      orderingKey: 'k',
    });
    const second = await t.service.emitter.emit({
      tenantId: 'acme',
      type: 'user.updated',
      data: {},
      orderingKey: 'k',
    });
    await fanOutAll();
    expect(await deliveriesOf(first.id)).toEqual([{ endpoint_id: endpoint.id, status: 'pending' }]);
    expect(await deliveriesOf(second.id)).toEqual([{ endpoint_id: endpoint.id, status: 'held' }]);
  });

  it('wakes the workers only when an emit leaves them something to do', async () => {
    let wakes = 0;
    const unsubscribe = await t.service.ctx.signal.onWake(() => wakes++);
    try {
      await t.service.emitter.emit({ tenantId: 'nobody-listens', type: 'user.updated', data: {} });
      // Fanned out at once to no endpoint on SQLite; left to the workers' fan-out on PostgreSQL (where
      // the notification also comes back through LISTEN, so more than one wake may arrive).
      if (atEmit) expect(wakes).toBe(0);
      else expect(wakes).toBeGreaterThan(0);
      const before = wakes;
      await createEndpoint(t, { url: URL, events: ['user.*'] });
      await t.service.emitter.emit({ tenantId: 'acme', type: 'user.updated', data: {} });
      expect(wakes).toBeGreaterThan(before);
    } finally {
      unsubscribe();
    }
  });
});
