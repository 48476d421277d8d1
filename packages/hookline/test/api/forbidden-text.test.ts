// NUL and unpaired surrogates are refused at the edge, for every string in the path, query, headers
// and body, with the same 400 on both stores (PostgreSQL text cannot hold NUL and answered 500
// before). The event's `data` is payload and exempt: it is delivered byte for byte.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, expectError, rawRequest } from './support.js';

/** Requests an instance manager (im), tenant or producer makes, each with one forbidden string. */
const CASES: [string, 'im' | 'tenant' | 'producer', string, string, unknown, RegExp][] = [
  [
    'query',
    'im',
    'GET',
    '/v1/admin/dead-letters?endpoint_id=%00',
    undefined,
    /querystring\/endpoint_id .*NUL/,
  ],
  ['path id', 'im', 'GET', '/v1/admin/dead-letters/dl_%00', undefined, /params\/id .*NUL/],
  ['path id', 'im', 'DELETE', '/v1/admin/api-keys/%00', undefined, /params\/id .*NUL/],
  ['path id', 'tenant', 'PATCH', '/v1/webhooks/%00', { description: 'x' }, /params\/id .*NUL/],
  [
    'body',
    'im',
    'POST',
    '/v1/admin/dead-letters/replay',
    { endpoint_id: '\u0000' },
    /body\/endpoint_id .*NUL/,
  ],
  ['body', 'im', 'POST', '/v1/admin/api-keys', { role: 'producer', label: 'l\u0000' }, /body\/label .*NUL/],
  [
    'body',
    'im',
    'POST',
    '/v1/admin/api-keys',
    { role: 'producer', label: 'l\udc00' },
    /body\/label .*surrogate/,
  ],
  [
    'body',
    'im',
    'POST',
    '/v1/admin/api-keys',
    { role: 'producer', label: '\ud83d' },
    /body\/label .*surrogate/,
  ],
  [
    'field name',
    'im',
    'POST',
    '/v1/admin/api-keys',
    { role: 'producer', 'label\u0000': 'x' },
    /field name .*NUL/,
  ],
  [
    'nested',
    'tenant',
    'POST',
    '/v1/webhooks',
    { url: 'https://a.example/', events: ['*', 'user.created\u0000'] },
    /body\/events\/1 .*NUL/,
  ],
  [
    'body url',
    'tenant',
    'POST',
    '/v1/webhooks',
    { url: 'https://a.example/\ud800', events: ['*'] },
    /body\/url .*surrogate/,
  ],
  [
    'event type',
    'producer',
    'POST',
    '/v1/events',
    { tenant_id: 'acme', type: 'user.updated\u0000', data: {} },
    /body\/type .*NUL/,
  ],
];

describe.each(STORE_KINDS)('NUL and unpaired surrogates on %s', (kind) => {
  let t: TestService;
  let receiver: Receiver;
  beforeAll(async () => {
    t = await startTestService(kind, { worker: true });
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  const count = async (table: string) =>
    Number((await t.service.ctx.db.all<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))[0]!.n);

  it.each(CASES)(
    'refuses a forbidden string in the %s of %s %s with 400 validation_failed',
    async (_where, who, method, url, body, message) => {
      const keys = { im: t.keys.instance_manager, tenant: t.keys.tenant, producer: t.keys.producer };
      const before = [
        await count('api_keys'),
        await count('endpoints'),
        await count('messages'),
        await count('audit_log'),
      ];
      const res = await t.call(method, url, keys[who], body);
      expectError(res, 400, 'validation_failed');
      expect((res.json() as { error: { message: string } }).error.message).toMatch(message);
      const after = [
        await count('api_keys'),
        await count('endpoints'),
        await count('messages'),
        await count('audit_log'),
      ];
      expect(after).toEqual(before);
    },
  );

  it('refuses NUL in a header value such as Idempotency-Key', async () => {
    const res = await rawRequest(
      t,
      'POST',
      '/v1/events',
      t.keys.producer,
      JSON.stringify({ tenant_id: 'acme', type: 'user.updated', data: {} }),
      'application/json',
      { 'idempotency-key': 'k\u0000' },
    );
    expectError(res, 400, 'validation_failed');
    expect(await count('messages')).toBe(0);
  });

  it('answers a cursor holding NUL like any cursor this API did not return: 400 invalid_cursor', async () => {
    for (const url of ['/v1/webhooks?cursor=a%00b', '/v1/admin/audit-log?cursor=%00']) {
      const key = url.startsWith('/v1/admin') ? t.keys.instance_manager : t.keys.tenant;
      const res = await t.call('GET', url, key);
      expectError(res, 400, 'invalid_cursor');
      expect((res.json() as { error: { message: string } }).error.message).toMatch(
        /querystring\/cursor .*NUL/,
      );
    }
  });

  it('keeps text that merely looks close: paired surrogates, other control characters, U+FFFD', async () => {
    const label = '😀 \u0001\u001f\u007f \ufffd \ud83d\ude00';
    const res = await t.call('POST', '/v1/admin/api-keys', t.keys.instance_manager, {
      role: 'producer',
      label,
    });
    expect(res.statusCode, res.body).toBe(201);
    expect((res.json() as { label: string }).label).toBe(label);
  });

  it('delivers NUL and lone surrogates inside event data byte for byte', async () => {
    const key = await t.keyFor('tenant', 'payload-co');
    await createEndpoint(t, { key, url: receiver.url, events: ['user.updated'] });
    const data = { s: 'a\u0000b', lone: '\ud800', 'k\u0000ey': ['\udfff'] };
    const res = await t.call('POST', '/v1/events', t.keys.producer, {
      tenant_id: 'payload-co',
      type: 'user.updated',
      data,
    });
    expect(res.statusCode, res.body).toBe(202);
    const [received] = await receiver.waitFor(1);
    expect(received!.body).toBe(JSON.stringify({ type: 'user.updated', data }));
    expect(received!.body).toContain('a\\u0000b');
    expect((JSON.parse(received!.body) as { data: unknown }).data).toEqual(data);
  });
});
