// Ordered delivery per key, end to end on both stores (docs/contract.md §6, docs/delivery.md "Ordered
// delivery"): real subscribers that fail at random and answer slowly still see each key's events
// first succeed in emit order; unkeyed events keep flowing while a key's head is retried; a dead head
// lets the next go, and its replay joins the back of the line.
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  emitRounds,
  expectEmitOrder,
  keyName,
  seeded,
  startOrderedSubscriber,
  type OrderedSubscriber,
  waitForDeliveries,
} from './ordering-support.js';
import { createEndpoint } from './support.js';

const KEYS = 20;
const EVENTS = 50;
const UNKEYED_PER_ROUND = 2;

describe.each(STORE_KINDS)('ordered delivery on %s', (kind) => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  async function setUp(env: Record<string, string>, subscribers: OrderedSubscriber[]): Promise<TestService> {
    const t = await startTestService(kind, { worker: true, env });
    cleanup.push(() => t.close());
    for (const s of subscribers) {
      cleanup.push(() => s.receiver.close());
      await createEndpoint(t, { url: s.receiver.url, events: ['*'] });
    }
    return t;
  }

  const emitter = (t: TestService) => async (body: object) => {
    const res = await t.call('POST', '/v1/events', t.keys.producer, { tenant_id: 'acme', ...body });
    expect(res.statusCode, res.body).toBe(202);
  };

  it(`${KEYS} keys × ${EVENTS} events first succeed in emit order at every subscriber, despite failures`, async () => {
    const subs = [
      await startOrderedSubscriber(1, { failureRate: 0.25, maxDelayMs: 8 }),
      await startOrderedSubscriber(2, { failureRate: 0.1, maxDelayMs: 3 }),
    ];
    const t = await setUp({ HOOKLINE_MAX_RETRIES: '40', HOOKLINE_RETRY_MAX_MS: '50' }, subs);
    await emitRounds(emitter(t), { keys: KEYS, events: EVENTS, unkeyedPerRound: UNKEYED_PER_ROUND });
    const total = KEYS * EVENTS + UNKEYED_PER_ROUND * EVENTS;
    await waitForDeliveries(t.service.ctx.db, subs, total);
    for (const s of subs) expectEmitOrder(s, KEYS, EVENTS);
    // Failures really happened, so the order was kept through retries, not by luck.
    expect(subs[0]!.receiver.requests.length).toBeGreaterThan(total * 1.1);
    // Seconds on an idle machine; the margin is for a loaded one, and a stall fails sooner, saying why.
  }, 60_000);

  it("with a subscriber failing 10 % at random, a line's next goes before the newer unkeyed backlog", async () => {
    // One attempt at a time (the ceiling), so the subscriber sees the order claims took: after each
    // success of a keyed event, the next claim must take the next of its line (or another keyed
    // delivery), never an unkeyed one emitted after it (docs/delivery.md, "Ordered delivery").
    const random = seeded(36);
    const log: { key: string | null; n: number; ok: boolean }[] = [];
    const receiver = await startReceiver((request) => {
      const { key, n } = (JSON.parse(request.body) as { data: { key: string | null; n: number } }).data;
      const ok = random() >= 0.1;
      log.push({ key, n, ok });
      return { status: ok ? 200 : 500, delayMs: 1 };
    });
    cleanup.push(() => receiver.close());
    const t = await startTestService(kind, {
      worker: true,
      env: { HOOKLINE_ENDPOINT_CONCURRENCY: '1', HOOKLINE_MAX_RETRIES: '40', HOOKLINE_RETRY_MAX_MS: '100' },
    });
    cleanup.push(() => t.close());
    await createEndpoint(t, { url: receiver.url, events: ['*'] });
    const emit = emitter(t);
    const keys = 3;
    const events = 5;
    await emitRounds(emit, { keys, events });
    // The unkeyed backlog reaches the endpoint after every keyed delivery: their due times are later.
    const db = t.service.ctx.db;
    const fannedOut = await eventually(async () => {
      const row = await db.one<{ n: number | string; at: number | string | null }>(
        'SELECT COUNT(*) AS n, MAX(created_at) AS at FROM deliveries WHERE ordering_key IS NOT NULL',
      );
      return Number(row!.n) === keys * events && Number(row!.at);
    });
    await eventually(() => Date.now() > fannedOut);
    const unkeyed = 300;
    for (let i = 0; i < unkeyed; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, (_, j) => emit({ type: 'user.updated', data: { key: null, n: i + j } })),
      );
    }
    await eventually(() => log.filter((r) => r.ok).length >= keys * events + unkeyed, 60_000);
    const firstOk = (key: string, n: number) => log.findIndex((r) => r.key === key && r.n === n && r.ok);
    for (let k = 0; k < keys; k++) {
      const key = keyName(k);
      // In emit order, one at a time: no attempt of an event before the one before it succeeded.
      const attempts = log.filter((r) => r.key === key).map((r) => r.n);
      expect(attempts, `attempts of ${key}`).toEqual([...attempts].sort((a, b) => a - b));
      for (let n = 1; n < events; n++) {
        const released = firstOk(key, n - 1);
        const next = log.findIndex((r) => r.key === key && r.n === n);
        const between = log.slice(released + 1, next).filter((r) => r.key === null);
        expect(between, `unkeyed attempts between ${key} #${n - 1}'s success and #${n}`).toEqual([]);
      }
    }
    // The lines ran while the unkeyed backlog waited: they did not just happen to finish first.
    const lastKeyed = Math.max(...Array.from({ length: keys }, (_, k) => firstOk(keyName(k), events - 1)));
    expect(log.slice(lastKeyed).some((r) => r.key === null)).toBe(true);
    expect(log.some((r) => !r.ok)).toBe(true);
  }, 60_000);

  it('unkeyed events and other keys keep flowing while a key waits on its retried head', async () => {
    const sub = await startOrderedSubscriber(3, { failureRate: 0, maxDelayMs: 2 });
    const t = await setUp({ HOOKLINE_MAX_RETRIES: '100', HOOKLINE_RETRY_MAX_MS: '30' }, [sub]);
    const emit = emitter(t);
    sub.failing.add('stuck');
    await emit({ type: 'user.updated', data: { key: 'stuck', n: 0 }, ordering_key: 'stuck' });
    await emit({ type: 'user.updated', data: { key: 'stuck', n: 1 }, ordering_key: 'stuck' });
    const stuckAttempts = () =>
      sub.receiver.requests.filter(
        (r) => (JSON.parse(r.body) as { data: { key: string } }).data.key === 'stuck',
      );
    await eventually(() => stuckAttempts().length >= 2);
    for (let n = 0; n < 20; n++) await emit({ type: 'user.updated', data: { key: null, n } });
    for (let n = 0; n < 5; n++) {
      await emit({ type: 'user.updated', data: { key: 'other', n }, ordering_key: 'other' });
    }
    await eventually(() => sub.unkeyedSuccesses === 20 && sub.firstSuccesses.get('other')?.length === 5);
    // All the while only the head of `stuck` was attempted.
    expect(stuckAttempts().every((r) => (JSON.parse(r.body) as { data: { n: number } }).data.n === 0)).toBe(
      true,
    );
    sub.failing.delete('stuck');
    await eventually(() => sub.firstSuccesses.get('stuck')?.length === 2);
    expect(sub.firstSuccesses.get('stuck')).toEqual([0, 1]);
    expect(sub.firstSuccesses.get('other')).toEqual([0, 1, 2, 3, 4]);
  });

  it('a dead head lets the next go; the dead letter shows its key and its replay joins the back of the line', async () => {
    const sub = await startOrderedSubscriber(4, { failureRate: 0, maxDelayMs: 1 });
    const t = await setUp({ HOOKLINE_MAX_RETRIES: '2', HOOKLINE_RETRY_MAX_MS: '20' }, [sub]);
    const emit = emitter(t);
    sub.failing.add('doomed');
    for (let n = 0; n < 3; n++) {
      await emit({ type: 'user.updated', data: { key: 'doomed', n }, ordering_key: 'doomed' });
    }
    const deadLetters = async () => {
      const res = await t.call('GET', '/v1/admin/dead-letters', t.keys.instance_manager);
      return res.json<{ data: { id: string; ordering_key: string | null }[] }>().data;
    };
    const [first] = await eventually(async () => {
      const list = await deadLetters();
      return list.length > 0 && list;
    });
    expect(first!.ordering_key).toBe('doomed');
    // While the head was being retried, nothing behind it was attempted.
    const attempted = sub.receiver.requests.map(
      (r) => (JSON.parse(r.body) as { data: { n: number } }).data.n,
    );
    expect(attempted.slice(0, 3)).toEqual([0, 0, 0]);
    sub.failing.delete('doomed');
    await eventually(() => sub.firstSuccesses.get('doomed')?.length === 2);
    expect(sub.firstSuccesses.get('doomed')).toEqual([1, 2]);
    // A replay goes to the back of the line: behind an event emitted after the death and still in
    // flight.
    sub.slow.set('doomed', 400);
    await emit({ type: 'user.updated', data: { key: 'doomed', n: 3 }, ordering_key: 'doomed' });
    await eventually(() => sub.receiver.requests.some((r) => r.body.includes('"n":3')));
    const replay = await t.call(
      'POST',
      `/v1/admin/dead-letters/${first!.id}/replay`,
      t.keys.instance_manager,
    );
    expect(replay.statusCode, replay.body).toBe(202);
    const { replay_delivery_id } = replay.json<{ replay_delivery_id: string }>();
    const row = await t.service.ctx.db.one<{ status: string }>(
      'SELECT status FROM deliveries WHERE id = $1',
      [replay_delivery_id],
    );
    expect(row!.status).toBe('held');
    sub.slow.delete('doomed');
    await eventually(() => sub.firstSuccesses.get('doomed')?.length === 4);
    expect(sub.firstSuccesses.get('doomed')).toEqual([1, 2, 3, 0]);
  });
});
