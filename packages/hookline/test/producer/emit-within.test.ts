// Emitting inside the product's own PostgreSQL transaction (docs/producers.md): the event exists if
// and only if the product's transaction committed. A PostgreSQL feature: skipped where only SQLite runs.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HooklineError } from '../../src/errors.js';
import { createProducer } from '../../src/producer/producer.js';
import { eventually } from '../helpers/receiver.js';
import { TEST_ENCRYPTION_KEY } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { counting, received, startRig, waitForIds, type ProducerRig } from './support.js';

const userCreated = (userId: string, extra: object = {}) => ({
  tenantId: 'acme',
  type: 'user.created' as const,
  data: { userId },
  ...extra,
});

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(HooklineError);
    return (err as HooklineError).code;
  }
  throw new Error('expected a HooklineError');
}

describe.runIf(STORE_KINDS.includes('postgres'))('emitWithin on PostgreSQL', () => {
  let rig: ProducerRig;
  beforeAll(async () => {
    // The worker polls once a minute: every delivery below within the tests' time-outs was woken by
    // the NOTIFY the emit's statement sends at commit.
    rig = await startRig({ pollIntervalMs: 60_000 });
  }, 60_000);
  afterAll(async () => rig.close());
  beforeEach(() => {
    rig.receiver.requests.length = 0;
  });

  it('refuses bad input before any query, leaving the transaction usable', async () => {
    const before = await rig.footprint();
    const client = await rig.connect();
    const product = counting(client);
    await client.query('BEGIN');
    const p = rig.producer;
    const bad: [Promise<unknown>, string][] = [
      [
        // A JavaScript caller gets this at run time; TypeScript refuses it at compile time.
        // @ts-expect-error -- not a catalogue name
        p.emitWithin(product, { ...userCreated('user_1'), type: 'user.creatd' }),
        'unknown_event_type',
      ],
      [p.emitWithin(product, userCreated('not-a-user-id')), 'invalid_event_data'],
      [p.emitWithin(product, { ...userCreated('user_1'), tenantId: 'no spaces' }), 'invalid_tenant_id'],
      [p.emitWithin(product, userCreated('user_1', { orderingKey: 'a\u0000b' })), 'validation_failed'],
      [p.emitWithin(product, userCreated('user_1', { idempotencyKey: '' })), 'validation_failed'],
      [
        p.emitWithin(product, {
          ...userCreated('user_1'),
          data: { userId: 'user_1', big: 'x'.repeat(300_000) },
        }),
        'payload_too_large',
      ],
      [p.emitManyWithin(product, [userCreated('user_1'), userCreated('bad')]), 'invalid_event_data'],
    ];
    for (const [promise, code] of bad) expect(await codeOf(promise)).toBe(code);
    expect(product.statements).toEqual([]);
    // Not aborted: the transaction still runs statements and commits.
    expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    await client.query('COMMIT');
    expect(await rig.footprint()).toEqual(before);
  });

  it('refuses a bad configuration', () => {
    expect(() => createProducer({ encryptionKey: 'short', schema: 'public' })).toThrow(/encryptionKey/);
    expect(() => createProducer({ encryptionKey: undefined })).toThrow(/encryptionKey/);
    expect(() => createProducer({ encryptionKey: TEST_ENCRYPTION_KEY, schema: 'x; DROP' })).toThrow(/schema/);
  });

  it('delivers at commit, woken without polling, in one round trip', async () => {
    const client = await rig.connect();
    const product = counting(client);
    await client.query('BEGIN');
    const { id } = await rig.producer.emitWithin(product, userCreated('user_commit'));
    expect(product.statements).toHaveLength(1);
    expect(id).toMatch(/^msg_/);
    await client.query('COMMIT');
    const [delivered] = await waitForIds(rig.receiver, [id]);
    expect(delivered).toEqual({ id, type: 'user.created', data: { userId: 'user_commit' } });
  });

  it('leaves no trace after a rollback', async () => {
    const before = await rig.footprint();
    const client = await rig.connect();
    await client.query('BEGIN');
    // A tenant never seen before too: its row goes with the rollback.
    await rig.producer.emitManyWithin(client, [
      userCreated('user_rolled_back', { orderingKey: 'k1', idempotencyKey: 'rb-1' }),
      { tenantId: 'brand-new-tenant', type: 'user.deleted', data: {} },
    ]);
    await client.query('ROLLBACK');
    expect(await rig.footprint()).toEqual(before);
    // Nothing goes out either: a committed emit after it is the only delivery.
    const after = await rig.connect();
    await after.query('BEGIN');
    const { id } = await rig.producer.emitWithin(after, userCreated('user_after'));
    await after.query('COMMIT');
    await waitForIds(rig.receiver, [id]);
    expect((await rig.footprint()).messages).toBe((before.messages as number) + 1);
    expect(received(rig.receiver).filter((r) => r.data.userId === 'user_rolled_back')).toEqual([]);
  });

  it('answers the same id for the same Idempotency-Key within 24 hours, and the HTTP emit agrees', async () => {
    const client = await rig.connect();
    const emitIn = async (input: ReturnType<typeof userCreated>) => {
      await client.query('BEGIN');
      try {
        return await rig.producer.emitWithin(client, input);
      } finally {
        await client.query('COMMIT');
      }
    };
    const first = await emitIn(userCreated('user_idem', { idempotencyKey: 'idem-1' }));
    expect(await emitIn(userCreated('user_idem', { idempotencyKey: 'idem-1' }))).toEqual(first);
    expect(await codeOf(emitIn(userCreated('user_other', { idempotencyKey: 'idem-1' })))).toBe(
      'idempotency_conflict',
    );
    // The HTTP path shares the key space and the fingerprint.
    const http = await rig.t.call('POST', '/v1/events', rig.t.keys.producer, {
      tenant_id: 'acme',
      type: 'user.created',
      data: { userId: 'user_idem' },
    });
    expect(http.statusCode).toBe(202);
    const viaHttp = await rig.t.inject({
      method: 'POST',
      url: '/v1/events',
      headers: {
        authorization: `Bearer ${rig.t.keys.producer}`,
        'content-type': 'application/json',
        'idempotency-key': 'idem-1',
      },
      payload: JSON.stringify({ tenant_id: 'acme', type: 'user.created', data: { userId: 'user_idem' } }),
    });
    expect(viaHttp.json()).toEqual(first);
    // Within one call, a repeated key answers the first one's id.
    await client.query('BEGIN');
    const many = await rig.producer.emitManyWithin(client, [
      userCreated('user_idem2', { idempotencyKey: 'idem-2' }),
      userCreated('user_idem2', { idempotencyKey: 'idem-2' }),
    ]);
    await client.query('COMMIT');
    expect(many[1]).toEqual(many[0]);
    // The same key with two different events in one call: refused before any query.
    const product = counting(client);
    expect(
      await codeOf(
        rig.producer.emitManyWithin(product, [
          userCreated('user_idem3', { idempotencyKey: 'idem-3' }),
          userCreated('user_idem4', { idempotencyKey: 'idem-3' }),
        ]),
      ),
    ).toBe('idempotency_conflict');
    expect(product.statements).toEqual([]);
    // Older than 24 hours, the key names a new message.
    await client.query(
      `UPDATE "${rig.schema}".messages SET created_at = created_at - 25 * 3600 * 1000 WHERE id = $1`,
      [first.id],
    );
    const later = await emitIn(userCreated('user_other', { idempotencyKey: 'idem-1' }));
    expect(later.id).not.toBe(first.id);
    expect(await emitIn(userCreated('user_other', { idempotencyKey: 'idem-1' }))).toEqual(later);
  });

  it('a second transaction with the same new key waits for the first, then answers its id', async () => {
    const a = await rig.connect();
    const b = await rig.connect();
    await a.query('BEGIN');
    await b.query('BEGIN');
    const first = await rig.producer.emitWithin(a, userCreated('user_race', { idempotencyKey: 'race-1' }));
    const second = rig.producer.emitWithin(b, userCreated('user_race', { idempotencyKey: 'race-1' }));
    // b is blocked on a's uncommitted key: it answers only after a commits.
    let settled = false;
    void second.finally(() => (settled = true));
    await eventually(async () => {
      const r = await rig.t.service.ctx.db.one<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid = $1`,
        [(b as unknown as { processID: number }).processID],
      );
      return r!.n === 1;
    });
    expect(settled).toBe(false);
    await a.query('COMMIT');
    expect(await second).toEqual(first);
    await b.query('COMMIT');
    expect(
      (
        await rig.t.service.ctx.db.all('SELECT id FROM messages WHERE idempotency_key = $1', [
          rig.t.service.ctx.envelope.keyHash('idempotency', 'acme', 'race-1'),
        ])
      ).length,
    ).toBe(1);
  });

  it("keeps a key's events of one call in input order, in one round trip", async () => {
    const client = await rig.connect();
    const product = counting(client);
    await client.query('BEGIN');
    const types = ['user.created', 'user.updated', 'user.banned', 'user.unbanned', 'user.deleted'] as const;
    const ids = await rig.producer.emitManyWithin(
      product,
      types.map((type) => ({
        tenantId: 'acme',
        type,
        data: { userId: 'user_many' },
        orderingKey: 'user_many',
      })),
    );
    expect(product.statements).toHaveLength(1);
    await client.query('COMMIT');
    const delivered = await waitForIds(
      rig.receiver,
      ids.map((r) => r.id),
    );
    expect(delivered.map((r) => r.type)).toEqual([...types]);
    expect(delivered.map((r) => r.id)).toEqual(ids.map((r) => r.id));
  });

  it('orders two transactions emitting one key by commit: an open one holds up no committed one', async () => {
    // The statement (docs/producers.md, "Order"): an event whose transaction committed before another
    // transaction emitted comes first; of two transactions that overlap, each event goes when its
    // transaction commits and the workers have seen it, and an uncommitted event holds up nothing.
    const a = await rig.connect();
    const b = await rig.connect();
    const c = await rig.connect();
    await a.query('BEGIN');
    const fromA = await rig.producer.emitWithin(a, {
      tenantId: 'acme',
      type: 'user.updated',
      data: { step: 'a' },
      orderingKey: 'shared',
    });
    await b.query('BEGIN');
    const fromB = await rig.producer.emitWithin(b, {
      tenantId: 'acme',
      type: 'user.updated',
      data: { step: 'b' },
      orderingKey: 'shared',
    });
    await b.query('COMMIT');
    // b emitted after a but committed first: delivered while a is still open.
    await waitForIds(rig.receiver, [fromB.id]);
    await a.query('COMMIT');
    await waitForIds(rig.receiver, [fromA.id]);
    // c emits after a and b committed: it comes after both.
    await c.query('BEGIN');
    const fromC = await rig.producer.emitWithin(c, {
      tenantId: 'acme',
      type: 'user.updated',
      data: { step: 'c' },
      orderingKey: 'shared',
    });
    await c.query('COMMIT');
    const delivered = await waitForIds(rig.receiver, [fromA.id, fromB.id, fromC.id]);
    expect(delivered.map((r) => r.id)).toEqual([fromB.id, fromA.id, fromC.id]);
  });

  it('a line takes events in the order their commits were seen, also behind a head that is failing', async () => {
    // B emits after A but commits first, while the key's line is held up by C, whose subscriber keeps
    // failing. B is fanned out and waits; then A commits and is fanned out behind it. When C at last
    // succeeds, B goes before A: the order fan-out saw the commits in, not the order of the emits.
    const own = await startRig({ env: { HOOKLINE_MAX_RETRIES: '100' } });
    try {
      let failC: string | null = null;
      own.receiver.respond((r) => ({ status: r.headers['hook-id'] === failC ? 500 : 204 }));
      const key = { tenantId: 'acme', type: 'user.updated' as const, orderingKey: 'line' };
      const emitAlone = async (step: string, client: Awaited<ReturnType<typeof own.connect>>) => {
        await client.query('BEGIN');
        const r = await own.producer.emitWithin(client, { ...key, data: { step } });
        return r.id;
      };
      const [a, b, c] = [await own.connect(), await own.connect(), await own.connect()];
      const fromC = await emitAlone('c', c);
      failC = fromC;
      await c.query('COMMIT');
      await eventually(() => own.receiver.requests.some((r) => r.headers['hook-id'] === fromC));
      const fromA = await emitAlone('a', a);
      const fromB = await emitAlone('b', b);
      await b.query('COMMIT');
      const admin = await own.connect();
      const statusOf = async (messageId: string) =>
        (
          await admin.query(`SELECT status FROM "${own.schema}".deliveries WHERE message_id = $1`, [
            messageId,
          ])
        ).rows[0]?.status as string | undefined;
      await eventually(async () => (await statusOf(fromB)) === 'held');
      await a.query('COMMIT');
      await eventually(async () => (await statusOf(fromA)) === 'held');
      failC = null;
      const delivered = await waitForIds(own.receiver, [fromC, fromA, fromB]);
      expect(delivered.map((r) => r.id)).toEqual([fromC, fromB, fromA]);
    } finally {
      await own.close();
    }
  }, 60_000);

  it('a product transaction held open stalls no other emit or delivery', async () => {
    const holder = await rig.connect();
    await holder.query('BEGIN');
    // What a sign-up transaction holds: a keyed emit of a known tenant and one of a new tenant.
    const held = await rig.producer.emitManyWithin(holder, [
      userCreated('user_held', { orderingKey: 'user_held', idempotencyKey: 'held-1' }),
      { tenantId: 'held-new-tenant', type: 'user.created', data: { userId: 'user_held2' } },
    ]);
    const heldSince = Date.now();
    // Meanwhile other product transactions (keyed and not, with keys of their own) and HTTP emits.
    const others = await rig.connect();
    const ids: string[] = [];
    const latencies: number[] = [];
    // For 10 s at least (the long product transaction), and 20 rounds at least.
    for (let i = 0; i < 20 || Date.now() - heldSince < 10_000; i++) {
      const started = Date.now();
      await others.query('BEGIN');
      const r = await rig.producer.emitWithin(
        others,
        userCreated(`user_o${i}`, { orderingKey: i % 2 ? `k${i}` : null }),
      );
      await others.query('COMMIT');
      latencies.push(Date.now() - started);
      ids.push(r.id);
      const http = await rig.t.call('POST', '/v1/events', rig.t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.updated',
        data: { i },
        ordering_key: `h${i % 3}`,
      });
      expect(http.statusCode).toBe(202);
      ids.push((http.json() as { id: string }).id);
    }
    // Every one of them delivered while the holder is still open.
    await waitForIds(rig.receiver, ids, 30_000);
    // Then committed: its event follows.
    await holder.query('COMMIT');
    const delivered = await waitForIds(rig.receiver, [...ids, held[0]!.id]);
    expect(delivered.at(-1)!.id).toBe(held[0]!.id);
    const sorted = [...latencies].sort((a, b) => a - b);
    const p = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
    console.log(
      `held open ${Date.now() - heldSince} ms: ${latencies.length} emitWithin + commit beside it, p50 ${p(0.5)} / p99 ${p(0.99)} / max ${sorted.at(-1)} ms`,
    );
  }, 120_000);
});
