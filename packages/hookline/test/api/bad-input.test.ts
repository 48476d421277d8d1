// Bad input never gives a 500 (docs/contract.md §4): every route, fed malformed bodies, content types, ids and
// query strings, answers a 4xx in the one error shape and changes nothing.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  createEndpoint,
  expectEndpoint,
  expectError,
  rawRequest,
  storedSecrets,
  type EndpointJson,
} from './support.js';

/** A 4xx in the error shape; answers the code. */
function expectRefused(res: LightMyRequestResponse): string {
  expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
  expect(res.statusCode, res.body).toBeLessThan(500);
  return expectError(res, res.statusCode);
}

const HUGE = 'x'.repeat(200 * 1024);

/** Raw bodies that are not JSON at all. */
const NOT_JSON: [string, string][] = [
  ['a lone brace', '{'],
  ['a truncated object', '{"url": "https://a.example/", "events": ['],
  ['single quotes', "{'url': 'https://a.example/'}"],
  ['a trailing comma', '{"url": "https://a.example/",}'],
  ['undefined', 'undefined'],
  ['NaN', 'NaN'],
  ['a bare word', 'hello'],
  ['two documents', '{} {}'],
  ['a NUL byte', '\u0000'],
  ['a byte-order mark', '\ufeff{}'],
  ['deep unclosed arrays', '['.repeat(100_000)],
  ['a huge unterminated string', `"${HUGE}`],
];

/** Bodies that are JSON, but not an object with the route's fields. */
const WRONG_SHAPES: [string, unknown][] = [
  ['null', null],
  ['true', true],
  ['a number', 42],
  ['a string', 'https://a.example/'],
  ['an empty array', []],
  ['an array of the right object', [{ url: 'https://a.example/', events: ['*'] }]],
  ['an object with only unknown fields', { colour: 'blue' }],
  ['__proto__', JSON.parse('{"__proto__": {"admin": true}}')],
  ['constructor.prototype', { constructor: { prototype: { admin: true } } }],
];

/** Valid bodies of each body-taking route, and wrong values for each of their fields. */
interface BodyRoute {
  name: string;
  method: string;
  url: () => string;
  key: () => string;
  valid: Record<string, unknown>;
  wrong: Record<string, unknown[]>;
  /** A route with an optional body takes a JSON `null` as no body. */
  nullIsNoBody?: boolean;
}

describe.each(STORE_KINDS)('bad input on %s', (kind) => {
  let t: TestService;
  let endpoint: EndpointJson & { signing_secret: string };
  beforeAll(async () => {
    t = await startTestService(kind);
    endpoint = await createEndpoint(t, { description: 'the one' });
  });
  afterAll(async () => t.close());

  /** Removes the events a test emitted (and the deliveries the emit made on SQLite), for expectNothingChanged. */
  async function forgetEvents() {
    await t.service.ctx.db.run('DELETE FROM deliveries');
    await t.service.ctx.db.run('DELETE FROM messages');
  }

  /** The fixture endpoint is untouched and no other endpoint or message appeared. */
  async function expectNothingChanged() {
    const list = await t.call('GET', '/v1/webhooks?status=deleted', t.keys.tenant);
    expect((list.json() as { data: unknown[] }).data).toEqual([]);
    const active = await t.call('GET', '/v1/webhooks', t.keys.tenant);
    const { signing_secret, ...view } = endpoint;
    expect((active.json() as { data: unknown[] }).data).toEqual([view]);
    expect(await storedSecrets(t, endpoint.id)).toEqual([signing_secret]);
    expect(await t.service.ctx.db.all('SELECT id FROM messages')).toEqual([]);
  }

  const bodyRoutes = (): BodyRoute[] => [
    {
      name: 'POST /v1/webhooks',
      method: 'POST',
      url: () => '/v1/webhooks',
      key: () => t.keys.tenant,
      valid: { url: 'https://a.example/', events: ['*'], description: 'd' },
      wrong: {
        url: [null, 5, true, [], {}, ['https://a.example/'], HUGE, 'https://a.example/\u0000'],
        events: [null, '*', 5, {}, [null], [5], [['*']], [{}], [HUGE], Array(51).fill('*')],
        description: [null, 5, true, [], {}, HUGE, 'nul\u0000byte', 'lone \ud800 surrogate'],
      },
    },
    {
      name: 'PATCH /v1/webhooks/:id',
      method: 'PATCH',
      url: () => `/v1/webhooks/${endpoint.id}`,
      key: () => t.keys.tenant,
      valid: { description: 'the one' },
      wrong: {
        url: [null, 5, [], {}, HUGE, '', 'ftp://a.example/'],
        events: [null, '*', [], [5], ['org*'], [HUGE]],
        description: [null, 5, {}, HUGE, 'nul\u0000byte', 'lone \udfff surrogate'],
        status: [null, 'disabled', 'deleted', 5, true, ['active'], { status: 'active' }],
      },
    },
    {
      name: 'POST /v1/webhooks/:id/rotate-secret',
      method: 'POST',
      url: () => `/v1/webhooks/${endpoint.id}/rotate-secret`,
      key: () => t.keys.tenant,
      valid: {},
      nullIsNoBody: true,
      wrong: {
        grace_period_seconds: [null, '60', -1, 604_801, 0.5, 1e300, true, [], {}, HUGE],
      },
    },
    {
      name: 'POST /v1/events',
      method: 'POST',
      url: () => '/v1/events',
      key: () => t.keys.producer,
      valid: { tenant_id: 'acme', type: 'user.updated', data: {} },
      wrong: {
        tenant_id: [null, 5, '', 'a b', 'x'.repeat(65), HUGE, 'nul\u0000', [], {}],
        type: [null, 5, '', HUGE, 'user.exploded', ['user.updated'], {}, 'user.updated\u0000'],
        data: [null, 5, 'x', [], [{}], true],
      },
    },
  ];

  for (const route of bodyRoutes()) {
    describe(route.name, () => {
      it.each(NOT_JSON)('answers 400 invalid_json for %s', async (_what, payload) => {
        const res = await rawRequest(t, route.method, route.url(), route.key(), payload);
        expectError(res, 400, 'invalid_json');
      });

      const shapes = WRONG_SHAPES.filter(([, body]) => !(route.nullIsNoBody && body === null));
      it.each(shapes)('answers 400 validation_failed for %s', async (_what, body) => {
        const res = await t.call(route.method, route.url(), route.key(), JSON.stringify(body));
        expectError(res, 400, 'validation_failed');
      });

      it('answers 400 for a wrong value in each field', async () => {
        for (const [field, values] of Object.entries(route.wrong)) {
          for (const value of values) {
            const res = await t.call(route.method, route.url(), route.key(), {
              ...route.valid,
              [field]: value,
            });
            const code = expectRefused(res);
            expect(res.statusCode, `${field}: ${JSON.stringify(value)?.slice(0, 50)}`).toBe(400);
            expect(code).not.toBe('internal_error');
          }
        }
      });

      it('answers 400 for an unknown field beside valid ones', async () => {
        const res = await t.call(route.method, route.url(), route.key(), { ...route.valid, unexpected: 1 });
        expectError(res, 400, 'validation_failed');
        expect((res.json() as { error: { message: string } }).error.message).toMatch(
          /^body has an unknown field "unexpected"; allowed fields are /,
        );
      });

      it.each([
        ['text/plain', 415],
        ['application/x-www-form-urlencoded', 415],
        ['multipart/form-data; boundary=x', 415],
        ['application/xml', 415],
      ])('answers %s with %i unsupported_media_type', async (contentType, status) => {
        const res = await rawRequest(
          t,
          route.method,
          route.url(),
          route.key(),
          JSON.stringify(route.valid),
          contentType,
        );
        expectError(res, status, 'unsupported_media_type');
      });

      it('answers a JSON body without any content-type with 415', async () => {
        const res = await rawRequest(
          t,
          route.method,
          route.url(),
          route.key(),
          JSON.stringify(route.valid),
          null,
        );
        expectError(res, 415, 'unsupported_media_type');
      });

      it('answers 413 payload_too_large for a body over 256 KiB', async () => {
        const body = JSON.stringify({ ...route.valid, padding: 'p'.repeat(300 * 1024) });
        expectError(
          await rawRequest(t, route.method, route.url(), route.key(), body),
          413,
          'payload_too_large',
        );
      });
    });
  }

  it('changed nothing through all the bad bodies above', async () => {
    await expectNothingChanged();
  });

  describe('unicode', () => {
    it('keeps descriptions of emoji, right-to-left and combining text exactly', async () => {
      const description = '😀 שלום مرحبا e\u0301 \u2028 日本語 \t"quoted" \\ back';
      const key = await t.keyFor('tenant', 'unicode-co');
      const created = await createEndpoint(t, { key, description });
      expect(created.description).toBe(description);
      const got = expectEndpoint(await t.call('GET', `/v1/webhooks/${created.id}`, key));
      expect(got.description).toBe(description);
      const patched = await t.call('PATCH', `/v1/webhooks/${created.id}`, key, {
        description: `${description}!`,
      });
      expect(expectEndpoint(patched).description).toBe(`${description}!`);
      const listed = await t.call('GET', '/v1/webhooks', key);
      expect((listed.json() as { data: EndpointJson[] }).data[0]!.description).toBe(`${description}!`);
    });

    it('refuses a NUL character or an unpaired surrogate in a description with 400 on create and patch', async () => {
      for (const description of ['a\u0000b', 'a\ud800b', '\udc00']) {
        expectError(
          await t.call('POST', '/v1/webhooks', t.keys.tenant, {
            url: 'https://a.example/',
            events: ['*'],
            description,
          }),
          400,
          'validation_failed',
        );
        expectError(
          await t.call('PATCH', `/v1/webhooks/${endpoint.id}`, t.keys.tenant, { description }),
          400,
          'validation_failed',
        );
      }
      await expectNothingChanged();
    });

    it('accepts unicode event data and idempotency keys', async () => {
      const res = await rawRequest(
        t,
        'POST',
        '/v1/events',
        t.keys.producer,
        JSON.stringify({
          tenant_id: 'acme',
          type: 'user.updated',
          data: { name: '😀\u0000\ud800', rtl: 'שלום' },
        }),
        'application/json',
        { 'idempotency-key': 'clé-\u00ff' },
      );
      expect(res.statusCode, res.body).toBe(202);
      await forgetEvents();
    });
  });

  describe('ids in the path', () => {
    const IDS: [string, string][] = [
      ['a short word', 'x'],
      ['dot-dot', '..'],
      ['encoded dot-dot', '%2e%2e'],
      ['an encoded traversal', '..%2F..%2Fetc%2Fpasswd'],
      ['an encoded slash in an id', `${'webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV'}%2Fx`],
      ['a NUL byte', '%00'],
      ['a NUL byte after a real-looking id', 'webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV%00'],
      ['SQL', "webhook_'%20OR%20'1'%3D'1"],
      ['an emoji', '%F0%9F%98%80'],
      ['a lower-case id', 'webhook_01arz3ndektsv4rrffq69g5fav'],
      ['an id one character short', 'webhook_01ARZ3NDEKTSV4RRFFQ69G5FA'],
      ['another kind of id', 'msg_01ARZ3NDEKTSV4RRFFQ69G5FAV'],
      ['100 characters', 'w'.repeat(100)],
      ['101 characters', 'w'.repeat(101)],
      ['a very long id', 'webhook_'.repeat(1000)],
      ['broken percent-encoding', '%ZZ'],
      ['a truncated UTF-8 sequence', '%E0%A4%A'],
      ['an invalid UTF-8 byte', '%FF'],
      ['a lone percent sign', '%'],
    ];
    const ROUTES: [string, string, unknown][] = [
      ['GET', '', undefined],
      ['PATCH', '', { description: 'x' }],
      ['DELETE', '', undefined],
      ['POST', '/restore', undefined],
      ['POST', '/rotate-secret', {}],
    ];

    for (const [method, suffix, body] of ROUTES) {
      it.each(IDS)(
        `answers ${method} /v1/webhooks/<%s>${suffix} with 400 or 404 in the error shape`,
        async (_what, id) => {
          const res = await t.call(method, `/v1/webhooks/${id}${suffix}`, t.keys.tenant, body);
          expectRefused(res);
          expect([400, 404]).toContain(res.statusCode);
        },
      );
    }

    it('answers an id that is not valid percent-encoding with 400 invalid_id', async () => {
      for (const id of ['%ZZ', '%E0%A4%A', '%']) {
        expectError(await t.call('GET', `/v1/webhooks/${id}`, t.keys.tenant), 400, 'invalid_id');
      }
    });

    it('answers an over-long id like any unknown id: 404 not_found', async () => {
      expectError(await t.call('GET', `/v1/webhooks/${'w'.repeat(101)}`, t.keys.tenant), 404, 'not_found');
      expectError(
        await t.call('GET', `/v1/webhooks/${'webhook_'.repeat(1000)}`, t.keys.tenant),
        404,
        'not_found',
      );
    });

    it('changed nothing', async () => {
      await expectNothingChanged();
    });
  });

  describe('query strings', () => {
    it.each([
      ['limit=%00'],
      ['limit=99999999999999999999999'],
      ['limit=-0'],
      ['limit[]=1'],
      ['limit[a]=1'],
      ['cursor[]=x'],
      ['status=%00'],
      ['status[]=active'],
      [`tenant_id=${'a'.repeat(5000)}`],
      ['tenant_id=%ZZ'],
      ['__proto__[x]=1'],
      ['constructor=1'],
      [`x=${'y'.repeat(10_000)}`],
    ])('answers GET /v1/webhooks?%s with a 400 in the error shape', async (query) => {
      expectError(await t.call('GET', `/v1/webhooks?${query}`, t.keys.tenant), 400);
    });

    it('ignores a query string on emit: the tenant is the one in the body', async () => {
      const res = await t.call('POST', '/v1/events?tenant_id=globex&x=1', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.updated',
        data: {},
      });
      expect(res.statusCode, res.body).toBe(202);
      const rows = await t.service.ctx.db.all<{ tenant_id: string }>('SELECT tenant_id FROM messages');
      expect(rows).toEqual([{ tenant_id: 'acme' }]);
      await forgetEvents();
    });
  });

  describe('methods', () => {
    it.each([
      ['PUT', '/v1/webhooks'],
      ['DELETE', '/v1/webhooks'],
      ['PATCH', '/v1/webhooks'],
      ['PUT', `/v1/webhooks/webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV`],
      ['GET', '/v1/webhooks/webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV/restore'],
      ['GET', '/v1/events'],
      ['DELETE', '/v1/events'],
    ])('answers %s %s with 404 not_found', async (method, url) => {
      expectError(
        await t.call(method, url, t.keys.tenant, method === 'GET' ? undefined : {}),
        404,
        'not_found',
      );
    });
  });
});
