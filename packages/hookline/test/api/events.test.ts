// POST /v1/events: the producer's emit (docs/contract.md §4.2), on both stores.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { messageAad } from '../../src/engine/sealing.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { MESSAGE_ID_SHAPE, expectError, manualClock, rawRequest, type ManualClock } from './support.js';
import { SPEC_EVENTS as EVENT_TYPES } from '../helpers/spec-catalogue.js';

interface MessageRow {
  id: string;
  tenant_id: string;
  event_type: string;
  payload: Buffer;
  idempotency_key: string | null;
}

describe.each(STORE_KINDS)('POST /v1/events on %s', (kind) => {
  let t: TestService;
  let clock: ManualClock;
  beforeAll(async () => {
    t = await startTestService(kind);
    clock = manualClock(t, { start: Date.UTC(2032, 0, 1) });
  });
  afterAll(async () => t.close());
  beforeEach(async () => {
    // Each test counts messages from zero.
    await t.service.ctx.db.run('DELETE FROM messages');
  });

  const emit = (body: unknown, key = t.keys.producer, headers: Record<string, string> = {}) =>
    rawRequest(
      t,
      'POST',
      '/v1/events',
      key,
      typeof body === 'string' ? body : JSON.stringify(body),
      'application/json',
      headers,
    );
  const messages = () =>
    t.service.ctx.db.all<MessageRow>(
      'SELECT id, tenant_id, event_type, payload, idempotency_key FROM messages ORDER BY id',
    );
  const emittedCount = async () => (await t.service.ctx.metrics.emitted.get()).values[0]?.value ?? 0;

  function acceptedId(res: { statusCode: number; body: string; json(): unknown }): string {
    expect(res.statusCode, res.body).toBe(202);
    const body = res.json() as { id: string };
    expect(Object.keys(body)).toEqual(['id']);
    expect(body.id).toMatch(MESSAGE_ID_SHAPE);
    return body.id;
  }

  it('answers 202 {id: msg_…} once the message is durable, before any fan-out', async () => {
    const data = { userId: 'user_29w83sxmDNGwOuEthce5gg56FcC', email: 'ada@example.com' };
    const id = acceptedId(await emit({ tenant_id: 'acme', type: 'user.created', data }));
    const rows = await messages();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      id,
      tenant_id: 'acme',
      event_type: 'user.created',
      idempotency_key: null,
    });
    // Stored encrypted, exactly the body deliveries will carry.
    const payload = Buffer.from(rows[0]!.payload);
    expect(payload.includes('ada@example.com')).toBe(false);
    expect(t.service.ctx.envelope.open(payload, messageAad(id)).toString('utf8')).toBe(
      JSON.stringify({ type: 'user.created', data }),
    );
    // No worker runs in this service: nothing has been fanned out or delivered.
    expect(await t.service.ctx.db.all('SELECT id FROM deliveries WHERE message_id = $1', [id])).toEqual([]);
  });

  it('is also open to instance_manager keys', async () => {
    acceptedId(await emit({ tenant_id: 'acme', type: 'user.updated', data: {} }, t.keys.instance_manager));
  });

  it('accepts every catalogue type, with any object as data for types other than user.created', async () => {
    for (const type of EVENT_TYPES) {
      const data = type === 'user.created' ? { userId: 'user_1' } : { anything: [1, 'two', { three: null }] };
      acceptedId(await emit({ tenant_id: 'acme', type, data }));
    }
    expect((await messages()).map((m) => m.event_type).sort()).toEqual([...EVENT_TYPES].sort());
  });

  it('gives every emit its own id', async () => {
    const body = { tenant_id: 'acme', type: 'user.updated', data: {} };
    const ids = [acceptedId(await emit(body)), acceptedId(await emit(body)), acceptedId(await emit(body))];
    expect(new Set(ids).size).toBe(3);
    expect(await messages()).toHaveLength(3);
  });

  it('creates the tenant implicitly', async () => {
    acceptedId(await emit({ tenant_id: 'brand-new_Tenant-1', type: 'organization.created', data: {} }));
    const tenants = await t.service.ctx.db.all<{ id: string }>('SELECT id FROM tenants WHERE id = $1', [
      'brand-new_Tenant-1',
    ]);
    expect(tenants).toEqual([{ id: 'brand-new_Tenant-1' }]);
  });

  it.each([
    ['user.exploded'],
    [''],
    ['USER.CREATED'],
    ['user.*'],
    ['*'],
    ['organizationInvitation.*'],
    ['user'],
  ])('answers 400 unknown_event_type for type %j and writes nothing', async (type) => {
    expectError(await emit({ tenant_id: 'acme', type, data: {} }), 400, 'unknown_event_type');
    expect(await messages()).toEqual([]);
  });

  it.each([
    ['without userId', {}],
    ['with userId null', { userId: null }],
    ['with a numeric userId', { userId: 42 }],
    ['with userId "42"', { userId: '42' }],
    ['with userId "user_"', { userId: 'user_' }],
    ['with userId "usr_1"', { userId: 'usr_1' }],
    ['with userId "User_1"', { userId: 'User_1' }],
    ['with a space in userId', { userId: 'user_a b' }],
    ['with a slash in userId', { userId: 'user_a/../b' }],
    ['with an over-long userId', { userId: `user_${'a'.repeat(256)}` }],
    ['with userId under another key', { user_id: 'user_1' }],
  ])('answers 400 invalid_event_data for user.created %s', async (_what, data) => {
    const res = await emit({ tenant_id: 'acme', type: 'user.created', data });
    expectError(res, 400, 'invalid_event_data');
    expect((res.json() as { error: { message: string } }).error.message).toContain('userId');
    expect(await messages()).toEqual([]);
  });

  it('accepts user.created with the longest userId', async () => {
    acceptedId(
      await emit({ tenant_id: 'acme', type: 'user.created', data: { userId: `user_${'a'.repeat(255)}` } }),
    );
  });

  it.each([[[]], [['user_1']], ['user_1'], [1], [null], [true]])(
    'answers 400 when data is %j (not an object)',
    async (data) => {
      expectError(await emit({ tenant_id: 'acme', type: 'user.updated', data }), 400, 'validation_failed');
      expect(await messages()).toEqual([]);
    },
  );

  it('stores an ordering_key with its emit order, and refuses a bad one with 400', async () => {
    const first = acceptedId(
      await emit({ tenant_id: 'acme', type: 'user.updated', data: {}, ordering_key: 'user_1' }),
    );
    const second = acceptedId(
      await emit({ tenant_id: 'acme', type: 'user.deleted', data: {}, ordering_key: `u${'x'.repeat(254)}` }),
    );
    const rows = await t.service.ctx.db.all<{ id: string; ordering_key: string; ordering_seq: number }>(
      'SELECT id, ordering_key, ordering_seq FROM messages WHERE ordering_key IS NOT NULL ORDER BY ordering_seq',
    );
    // Stored as keyed hashes (docs/security.md, "What is stored"), whatever the key's length.
    const { envelope } = t.service.ctx;
    expect(rows.map((r) => [r.id, r.ordering_key])).toEqual([
      [first, envelope.keyHash('ordering', 'acme', 'user_1')],
      [second, envelope.keyHash('ordering', 'acme', `u${'x'.repeat(254)}`)],
    ]);
    for (const bad of [
      '',
      'x'.repeat(256),
      'a\u0000b',
      'line\nbreak',
      'tab\t',
      '\u007f',
      '\u0085',
      5,
      null,
      {},
    ]) {
      expectError(
        await emit({ tenant_id: 'acme', type: 'user.updated', data: {}, ordering_key: bad }),
        400,
        'validation_failed',
      );
    }
    expect(await messages()).toHaveLength(2);
  });

  it('answers 400 when a field is missing or unknown', async () => {
    expectError(await emit({ type: 'user.updated', data: {} }), 400, 'validation_failed');
    expectError(await emit({ tenant_id: 'acme', data: {} }), 400, 'validation_failed');
    expectError(await emit({ tenant_id: 'acme', type: 'user.updated' }), 400, 'validation_failed');
    expectError(
      await emit({ tenant_id: 'acme', type: 'user.updated', data: {}, extra: 1 }),
      400,
      'validation_failed',
    );
    expect(await messages()).toEqual([]);
  });

  it.each([[''], ['a b'], ['x'.repeat(65)], ['ü'], ['a/b'], ['acme\n'], [5], [null]])(
    'answers 400 for tenant_id %j',
    async (tenant) => {
      const res = await emit({ tenant_id: tenant, type: 'user.updated', data: {} });
      expectError(res, 400, 'validation_failed');
      expect((res.json() as { error: { message: string } }).error.message).toContain('tenant_id');
      expect(await messages()).toEqual([]);
    },
  );

  it('accepts a tenant_id of 64 characters', async () => {
    acceptedId(await emit({ tenant_id: 'T'.repeat(64), type: 'user.updated', data: {} }));
  });

  it('answers 413 payload_too_large for a body over 256 KiB, and accepts one just under', async () => {
    const envelope = (filler: string) =>
      JSON.stringify({ tenant_id: 'acme', type: 'user.updated', data: { filler } });
    const overhead = envelope('').length;
    const justUnder = envelope('x'.repeat(256 * 1024 - overhead));
    expect(Buffer.byteLength(justUnder)).toBe(256 * 1024);
    acceptedId(await emit(justUnder));
    const over = envelope('x'.repeat(256 * 1024 - overhead + 1));
    expectError(await emit(over), 413, 'payload_too_large');
    expectError(await emit(envelope('x'.repeat(2 * 1024 * 1024))), 413, 'payload_too_large');
    // Multi-byte characters count as bytes, not characters.
    expectError(await emit(envelope('é'.repeat(140 * 1024))), 413, 'payload_too_large');
    expect(await messages()).toHaveLength(1);
  });

  it('answers 400, not 500, for data nested deeper than the server can walk', async () => {
    for (const depth of [5_000, 40_000]) {
      const nested = `{"tenant_id":"acme","type":"user.updated","data":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
      expectError(await emit(nested), 400, 'invalid_event_data');
      const arrays = `{"tenant_id":"acme","type":"user.updated","data":{"a":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
      expectError(await emit(arrays), 400, 'invalid_event_data');
    }
    // Ordinary nesting is fine.
    const modest = `{"tenant_id":"acme","type":"user.updated","data":${'{"a":'.repeat(100)}1${'}'.repeat(100)}}`;
    acceptedId(await emit(modest));
    expect(await messages()).toHaveLength(1);
  });

  describe('Idempotency-Key', () => {
    const body = { tenant_id: 'acme', type: 'user.updated', data: { userId: 'user_1', n: 1 } };

    it('answers the same id for the same key and body, writing one message and counting one emit', async () => {
      const before = await emittedCount();
      const first = acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'order-1' }));
      const second = acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'order-1' }));
      // Another key with the same role is the same producer as far as idempotency goes.
      const third = acceptedId(await emit(body, t.keys.instance_manager, { 'idempotency-key': 'order-1' }));
      expect(second).toBe(first);
      expect(third).toBe(first);
      const rows = await messages();
      const stored = t.service.ctx.envelope.keyHash('idempotency', 'acme', 'order-1');
      expect(rows.map((r) => [r.id, r.idempotency_key])).toEqual([[first, stored]]);
      expect(await emittedCount()).toBe(before + 1);
    });

    it('answers 409 idempotency_conflict for the same key with a different body', async () => {
      const first = acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'order-2' }));
      for (const other of [
        { ...body, data: { userId: 'user_1', n: 2 } },
        { ...body, type: 'user.deleted' },
        { ...body, data: {} },
      ]) {
        expectError(
          await emit(other, t.keys.producer, { 'idempotency-key': 'order-2' }),
          409,
          'idempotency_conflict',
        );
      }
      expect((await messages()).map((r) => r.id)).toEqual([first]);
      // The original still answers as before.
      expect(acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'order-2' }))).toBe(first);
    });

    it('scopes keys to the tenant: the same key for two tenants makes two messages', async () => {
      const a = acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'shared' }));
      const b = acceptedId(
        await emit({ ...body, tenant_id: 'globex' }, t.keys.producer, { 'idempotency-key': 'shared' }),
      );
      expect(a).not.toBe(b);
      const rows = await messages();
      expect(rows.map((r) => r.tenant_id).sort()).toEqual(['acme', 'globex']);
    });

    it('treats different keys, and no key, as different emits', async () => {
      const a = acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'k-a' }));
      const b = acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'k-b' }));
      const c = acceptedId(await emit(body));
      expect(new Set([a, b, c]).size).toBe(3);
      expect(await messages()).toHaveLength(3);
    });

    it('remembers a key for 24 hours, then lets it name a new message', async () => {
      const first = acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'daily' }));
      clock.advance(24 * 60 * 60 * 1000 - 1);
      expect(acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'daily' }))).toBe(first);
      expectError(
        await emit({ ...body, data: {} }, t.keys.producer, { 'idempotency-key': 'daily' }),
        409,
        'idempotency_conflict',
      );
      clock.advance(1);
      const later = acceptedId(
        await emit({ ...body, data: {} }, t.keys.producer, { 'idempotency-key': 'daily' }),
      );
      expect(later).not.toBe(first);
      expect(
        acceptedId(await emit({ ...body, data: {} }, t.keys.producer, { 'idempotency-key': 'daily' })),
      ).toBe(later);
      expect(await messages()).toHaveLength(2);
    });

    it('answers concurrent emits with the same key with one id and one message', async () => {
      const answers = await Promise.all(
        Array.from({ length: 8 }, () => emit(body, t.keys.producer, { 'idempotency-key': 'race' })),
      );
      const ids = answers.map(acceptedId);
      expect(new Set(ids).size).toBe(1);
      expect((await messages()).map((r) => r.id)).toEqual([ids[0]]);
    });

    it('answers each emit of a group by its own tenant and key: replayed, refused or new', async () => {
      const other = { ...body, data: { userId: 'user_2', n: 2 } };
      const replayed = acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'g-same' }));
      acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'g-changed' }));
      const before = (await messages()).length;
      // Sent together, so they are written as one group: the keys are looked up in one statement.
      const [same, changed, fresh, elsewhere, plain] = await Promise.all([
        emit(body, t.keys.producer, { 'idempotency-key': 'g-same' }),
        emit(other, t.keys.producer, { 'idempotency-key': 'g-changed' }),
        emit(body, t.keys.producer, { 'idempotency-key': 'g-new' }),
        emit({ ...body, tenant_id: 'globex' }, t.keys.producer, { 'idempotency-key': 'g-same' }),
        emit(body, t.keys.producer),
      ]);
      expect(acceptedId(same!)).toBe(replayed);
      expectError(changed!, 409, 'idempotency_conflict');
      const created = [acceptedId(fresh!), acceptedId(elsewhere!), acceptedId(plain!)];
      expect(new Set([replayed, ...created]).size).toBe(4);
      expect((await messages()).length).toBe(before + 3);
    });

    it('accepts a key of 255 characters and refuses an empty one or one of 256', async () => {
      acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'k'.repeat(255) }));
      expectError(
        await emit(body, t.keys.producer, { 'idempotency-key': 'k'.repeat(256) }),
        400,
        'validation_failed',
      );
      expectError(await emit(body, t.keys.producer, { 'idempotency-key': '' }), 400, 'validation_failed');
      expect(await messages()).toHaveLength(1);
    });

    it('does not let a refused emit reserve its key', async () => {
      expectError(
        await emit({ ...body, type: 'nope' }, t.keys.producer, { 'idempotency-key': 'after-error' }),
        400,
        'unknown_event_type',
      );
      acceptedId(await emit(body, t.keys.producer, { 'idempotency-key': 'after-error' }));
    });
  });
});
