// Keys, roles and tenancy (docs/contract.md §1): 401 without a valid key, 403 for the wrong role, and a
// tenant never sees another tenant's endpoints (404, never 403).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_ACTOR } from '../../src/engine/audit.js';
import { createApiKey, KEY_CACHE_MS } from '../../src/keys/api-keys.js';
import { revokeApiKey } from '../../src/store/api-keys.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, expectEndpoint, expectError, storedSecrets, type EndpointJson } from './support.js';

const SOME_ID = 'webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV';

/** Every authenticated route of this app, with a body that would be valid. */
const ROUTES: [method: string, url: string, body?: unknown][] = [
  ['POST', '/v1/webhooks', { url: 'https://a.example/', events: ['*'] }],
  ['GET', '/v1/webhooks'],
  ['GET', `/v1/webhooks/${SOME_ID}`],
  ['PATCH', `/v1/webhooks/${SOME_ID}`, { description: 'x' }],
  ['DELETE', `/v1/webhooks/${SOME_ID}`],
  ['POST', `/v1/webhooks/${SOME_ID}/restore`],
  ['POST', `/v1/webhooks/${SOME_ID}/rotate-secret`, {}],
  ['POST', '/v1/events', { tenant_id: 'acme', type: 'user.updated', data: {} }],
];
const WEBHOOK_ROUTES = ROUTES.filter(([, url]) => url.startsWith('/v1/webhooks'));

describe.each(STORE_KINDS)('authentication and tenancy on %s', (kind) => {
  let t: TestService;
  let revoked: string;
  beforeAll(async () => {
    t = await startTestService(kind);
    const created = await createApiKey(t.service.ctx, { role: 'instance_manager' }, CLI_ACTOR);
    await revokeApiKey(t.service.ctx.db, created.record.id, Date.now());
    revoked = created.key;
  });
  afterAll(async () => t.close());

  const unknownKey = `hk_t_${'A'.repeat(43)}`;

  describe.each(ROUTES)('%s %s', (method, url, body) => {
    it.each([
      ['no Authorization header', undefined],
      ['an empty header', ''],
      ['a scheme but no key', 'Bearer'],
      ['another scheme', 'Basic YWxhZGRpbjpvcGVuc2VzYW1l'],
      ['garbage', 'Bearer not-a-key'],
      ['a well-formed unknown key', `Bearer ${unknownKey}`],
      ['two keys', 'Bearer hk_t_a hk_t_b'],
      ['a key with a NUL-looking escape', 'Bearer hk_t_%00'],
    ])('answers 401 unauthorized for %s', async (_what, header) => {
      const res = await t.inject({
        method: method as 'GET',
        url,
        headers: {
          ...(header !== undefined ? { authorization: header } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
      });
      expectError(res, 401, 'unauthorized');
    });

    it('answers 401 unauthorized for a revoked key', async () => {
      expectError(await t.call(method, url, revoked, body), 401, 'unauthorized');
    });

    it('answers 401 before looking at the body', async () => {
      const res = await t.inject({
        method: method as 'POST',
        url,
        headers: { 'content-type': 'application/json' },
        payload: '{oops',
      });
      expectError(res, 401, 'unauthorized');
    });
  });

  it('accepts the scheme in any case and surrounding spaces', async () => {
    for (const header of [
      `bearer ${t.keys.tenant}`,
      `BEARER ${t.keys.tenant}`,
      `Bearer   ${t.keys.tenant}  `,
    ]) {
      const res = await t.inject({ method: 'GET', url: '/v1/webhooks', headers: { authorization: header } });
      expect(res.statusCode, res.body).toBe(200);
    }
  });

  it('stops accepting a key the moment it is revoked through this API', async () => {
    const created = await createApiKey(t.service.ctx, { role: 'tenant', tenantId: 'acme' }, CLI_ACTOR);
    expect((await t.call('GET', '/v1/webhooks', created.key)).statusCode).toBe(200);
    const res = await t.call('DELETE', `/v1/admin/api-keys/${created.record.id}`, t.keys.instance_manager);
    expect(res.statusCode, res.body).toBe(200);
    expectError(await t.call('GET', '/v1/webhooks', created.key), 401, 'unauthorized');
  });

  it('stops accepting a key revoked elsewhere (CLI, another process) within KEY_CACHE_MS', async () => {
    let now = Date.now();
    const other = await startTestService(kind, { clock: () => now });
    try {
      const created = await createApiKey(other.service.ctx, { role: 'tenant', tenantId: 'acme' }, CLI_ACTOR);
      expect((await other.call('GET', '/v1/webhooks', created.key)).statusCode).toBe(200);
      await revokeApiKey(other.service.ctx.db, created.record.id, now);
      now += KEY_CACHE_MS + 1;
      expectError(await other.call('GET', '/v1/webhooks', created.key), 401, 'unauthorized');
    } finally {
      await other.close();
    }
  });

  it.each(WEBHOOK_ROUTES)('answers 403 forbidden to a producer key on %s %s', async (method, url, body) => {
    expectError(await t.call(method, url, t.keys.producer, body), 403, 'forbidden');
  });

  it('answers 403 forbidden to a tenant key on POST /v1/events, and writes no message', async () => {
    const res = await t.call('POST', '/v1/events', t.keys.tenant, {
      tenant_id: 'acme',
      type: 'user.updated',
      data: {},
    });
    expectError(res, 403, 'forbidden');
    const rows = await t.service.ctx.db.all('SELECT id FROM messages');
    expect(rows).toEqual([]);
  });

  it('answers 403 to the wrong role even when the body is invalid', async () => {
    expectError(await t.call('POST', '/v1/webhooks', t.keys.producer, { nonsense: true }), 403, 'forbidden');
    expectError(await t.call('POST', '/v1/events', t.keys.tenant, 'not json at all'), 403, 'forbidden');
  });

  describe('tenant isolation', () => {
    let a: EndpointJson & { signing_secret: string };
    let keyA: string;
    let keyB: string;
    beforeAll(async () => {
      keyA = await t.keyFor('tenant', 'tenant-a');
      keyB = await t.keyFor('tenant', 'tenant-b');
      a = await createEndpoint(t, { key: keyA, description: 'A only' });
      await createEndpoint(t, { key: keyB, description: 'B only' });
    });

    it.each([
      ['GET', ''],
      ['PATCH', ''],
      ['DELETE', ''],
      ['POST', '/restore'],
      ['POST', '/rotate-secret'],
    ])("answers 404 not_found to tenant B's key for %s of tenant A's endpoint%s", async (method, suffix) => {
      const body = method === 'PATCH' ? { description: 'hijacked', status: 'active' } : undefined;
      const res = await t.call(method, `/v1/webhooks/${a.id}${suffix}`, keyB, body);
      expectError(res, 404, 'not_found');
      // Exactly the answer for an id that does not exist at all.
      const none = await t.call(method, `/v1/webhooks/${SOME_ID}${suffix}`, keyB, body);
      expect(res.json()).toEqual(none.json());
      // A's endpoint is untouched.
      const got = expectEndpoint(await t.call('GET', `/v1/webhooks/${a.id}`, keyA));
      expect(got).toMatchObject({ status: 'active', description: 'A only', updated_at: a.updated_at });
      expect(await storedSecrets(t, a.id)).toEqual([a.signing_secret]);
    });

    it("answers 404 to tenant B for restore of tenant A's deleted endpoint, which stays deleted", async () => {
      const doomed = await createEndpoint(t, { key: keyA });
      expectEndpoint(await t.call('DELETE', `/v1/webhooks/${doomed.id}`, keyA));
      expectError(await t.call('POST', `/v1/webhooks/${doomed.id}/restore`, keyB), 404, 'not_found');
      expect(expectEndpoint(await t.call('GET', `/v1/webhooks/${doomed.id}`, keyA)).status).toBe('deleted');
    });

    it("never lists another tenant's endpoints, whatever the status filter", async () => {
      for (const query of ['', '?status=active', '?status=deleted', '?status=disabled', '?limit=100']) {
        const res = await t.call('GET', `/v1/webhooks${query}`, keyB);
        expect(res.statusCode).toBe(200);
        const data = (res.json() as { data: EndpointJson[] }).data;
        expect(data.map((e) => e.description)).not.toContain('A only');
        expect(data.every((e) => e.description === 'B only')).toBe(true);
      }
    });

    it("a cursor only bounds the caller's own list", async () => {
      const res = await t.call('GET', `/v1/webhooks?cursor=webhook_7${'Z'.repeat(25)}`, keyB);
      expect(res.statusCode, res.body).toBe(200);
      const data = (res.json() as { data: EndpointJson[] }).data;
      expect(data.map((e) => e.description)).toEqual(['B only']);
    });

    it('answers 403 forbidden when a tenant key names another tenant_id, on every webhook route', async () => {
      for (const [method, url, body] of WEBHOOK_ROUTES) {
        const target = url.replace(SOME_ID, a.id);
        expectError(await t.call(method, `${target}?tenant_id=tenant-a`, keyB, body), 403, 'forbidden');
      }
      const got = expectEndpoint(await t.call('GET', `/v1/webhooks/${a.id}`, keyA));
      expect(got).toMatchObject({ status: 'active', description: 'A only' });
    });

    it('lets a tenant key name its own tenant_id', async () => {
      const res = await t.call('GET', `/v1/webhooks/${a.id}?tenant_id=tenant-a`, keyA);
      expect(expectEndpoint(res).id).toBe(a.id);
    });
  });

  describe('instance_manager with ?tenant_id=', () => {
    it("manages a tenant's endpoints through every route", async () => {
      const im = t.keys.instance_manager;
      const tenantKey = await t.keyFor('tenant', 'managed');
      const q = '?tenant_id=managed';
      const created = await createEndpoint(t, { key: im, query: q, description: 'by operator' });

      // The tenant sees what the operator made, and the other way round.
      const mine = await t.call('GET', `/v1/webhooks/${created.id}`, tenantKey);
      expect(expectEndpoint(mine).description).toBe('by operator');
      const theirs = await createEndpoint(t, { key: tenantKey, description: 'by tenant' });
      const listed = await t.call('GET', `/v1/webhooks${q}`, im);
      expect((listed.json() as { data: EndpointJson[] }).data.map((e) => e.id)).toEqual(
        [theirs.id, created.id].sort().reverse(),
      );

      const patched = await t.call('PATCH', `/v1/webhooks/${created.id}${q}`, im, { description: 'patched' });
      expect(expectEndpoint(patched).description).toBe('patched');
      const rotated = await t.call('POST', `/v1/webhooks/${created.id}/rotate-secret${q}`, im, {});
      expect(rotated.statusCode, rotated.body).toBe(200);
      const deleted = await t.call('DELETE', `/v1/webhooks/${created.id}${q}`, im);
      expect(expectEndpoint(deleted).status).toBe('deleted');
      const restored = await t.call('POST', `/v1/webhooks/${created.id}/restore${q}`, im);
      expect(expectEndpoint(restored).status).toBe('active');
      const got = await t.call('GET', `/v1/webhooks/${created.id}${q}`, im);
      expect(expectEndpoint(got)).toMatchObject({ description: 'patched', status: 'active' });
    });

    it('answers 404 for an endpoint of a tenant other than the one named', async () => {
      const acme = await createEndpoint(t);
      expectError(
        await t.call('GET', `/v1/webhooks/${acme.id}?tenant_id=globex`, t.keys.instance_manager),
        404,
        'not_found',
      );
      const list = await t.call('GET', '/v1/webhooks?tenant_id=globex', t.keys.instance_manager);
      expect(list.json()).toEqual({ data: [], next_cursor: null });
    });

    it.each(WEBHOOK_ROUTES)('answers 400 without tenant_id on %s %s', async (method, url, body) => {
      expectError(await t.call(method, url, t.keys.instance_manager, body), 400, 'validation_failed');
    });

    it.each([['a b'], ['x'.repeat(65)], ['ü'], ['a/b'], ['']])(
      'answers 400 for tenant_id=%j',
      async (tenant) => {
        const res = await t.call(
          'GET',
          `/v1/webhooks?tenant_id=${encodeURIComponent(tenant)}`,
          t.keys.instance_manager,
        );
        expectError(res, 400, 'validation_failed');
      },
    );

    it('may also emit', async () => {
      const res = await t.call('POST', '/v1/events', t.keys.instance_manager, {
        tenant_id: 'managed',
        type: 'organization.created',
        data: {},
      });
      expect(res.statusCode, res.body).toBe(202);
    });
  });
});
