// /v1/webhooks: create, get, patch, delete, restore and rotate-secret (docs/contract.md §4.1), on both stores.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fanOutBatch } from '../../src/engine/fanout.js';
import { disableEndpoint, getEndpointById } from '../../src/store/endpoints.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  createEndpoint,
  expectEndpoint,
  expectEndpointShape,
  expectError,
  expectSecretShape,
  manualClock,
  rawRequest,
  storedSecrets,
  type EndpointJson,
  type ManualClock,
} from './support.js';

describe.each(STORE_KINDS)('webhook endpoints on %s', (kind) => {
  let t: TestService;
  let clock: ManualClock;
  beforeAll(async () => {
    t = await startTestService(kind);
    clock = manualClock(t, { start: Date.UTC(2031, 4, 6, 7, 8, 9, 10) });
  });
  afterAll(async () => t.close());

  const url = (id: string, suffix = '') => `/v1/webhooks/${id}${suffix}`;

  describe('POST /v1/webhooks', () => {
    it('answers 201 with the endpoint and a whsec_ signing secret', async () => {
      const res = await t.call('POST', '/v1/webhooks', t.keys.tenant, {
        url: 'https://hooks.example.com/in?x=1',
        events: ['user.*', 'organizationInvitation.accepted'],
        description: 'CRM sync',
      });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      const body = res.json() as EndpointJson;
      expectSecretShape(body.signing_secret);
      const { signing_secret, ...endpoint } = body;
      expectEndpointShape(endpoint);
      expect(endpoint).toEqual({
        id: endpoint.id,
        url: 'https://hooks.example.com/in?x=1',
        events: ['user.*', 'organizationInvitation.accepted'],
        description: 'CRM sync',
        status: 'active',
        disabled_reason: null,
        rate_limit: null,
        headers: {},
        signature_scheme: 'v1',
        public_key: null,
        created_at: new Date(clock.now()).toISOString(),
        updated_at: new Date(clock.now()).toISOString(),
      });
      // The secret answered is the one deliveries are signed with, and it is stored encrypted.
      expect(await storedSecrets(t, endpoint.id)).toEqual([signing_secret]);
      const row = await getEndpointById(t.service.ctx.db, endpoint.id);
      expect(row?.tenant_id).toBe('acme');
      expect(Buffer.from(row!.secret).includes(signing_secret!)).toBe(false);
      expect(Buffer.from(row!.secret).includes(signing_secret!.slice(6))).toBe(false);
    });

    it('defaults description to "" and gives every endpoint its own id and secret', async () => {
      const a = await createEndpoint(t);
      const b = await createEndpoint(t);
      expect(a.description).toBe('');
      expect(a.id).not.toBe(b.id);
      expect(a.signing_secret).not.toBe(b.signing_secret);
    });

    it('accepts every wildcard and exact catalogue names, keeping their order and dropping repeats', async () => {
      const events = [
        'organization.auth_policy.updated',
        'user.*',
        'organization.*',
        'organizationMembership.*',
        '*',
        'connection.saml_certificate_renewed',
        'user.*',
      ];
      const created = await createEndpoint(t, { events });
      expect(created.events).toEqual(events.slice(0, 6));
      const got = expectEndpoint(await t.call('GET', url(created.id), t.keys.tenant));
      expect(got.events).toEqual(events.slice(0, 6));
    });
  });

  describe('GET /v1/webhooks/:id', () => {
    it('answers the endpoint exactly as created, without its secret', async () => {
      const created = await createEndpoint(t, { description: 'ü ✓ 日本' });
      const res = await t.call('GET', url(created.id), t.keys.tenant);
      const got = expectEndpoint(res);
      const { signing_secret, ...view } = created;
      expect(got).toEqual(view);
      expect(res.body).not.toContain(signing_secret);
    });

    it('answers 404 not_found for an unknown but well-formed id and for a malformed one', async () => {
      expectError(
        await t.call('GET', url('webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV'), t.keys.tenant),
        404,
        'not_found',
      );
      expectError(await t.call('GET', url('nope'), t.keys.tenant), 404, 'not_found');
    });
  });

  describe('PATCH /v1/webhooks/:id', () => {
    it('changes each field on its own and moves updated_at, never created_at', async () => {
      const created = await createEndpoint(t, { description: 'before', events: ['user.created'] });
      clock.advance(1000);
      const a = expectEndpoint(
        await t.call('PATCH', url(created.id), t.keys.tenant, { url: 'https://other.example.org/hook' }),
      );
      expect(a).toMatchObject({ url: 'https://other.example.org/hook', events: ['user.created'] });
      expect(a.description).toBe('before');
      expect(a.created_at).toBe(created.created_at);
      expect(a.updated_at).toBe(new Date(clock.now()).toISOString());
      expect(a.updated_at).not.toBe(created.updated_at);

      const b = expectEndpoint(
        await t.call('PATCH', url(created.id), t.keys.tenant, { events: ['organization.*', 'user.deleted'] }),
      );
      expect(b).toMatchObject({
        url: 'https://other.example.org/hook',
        events: ['organization.*', 'user.deleted'],
        description: 'before',
      });

      const c = expectEndpoint(await t.call('PATCH', url(created.id), t.keys.tenant, { description: '' }));
      expect(c).toMatchObject({
        description: '',
        events: ['organization.*', 'user.deleted'],
        status: 'active',
      });

      // What PATCH answered is what GET shows afterwards.
      expect(expectEndpoint(await t.call('GET', url(created.id), t.keys.tenant))).toEqual(c);
    });

    it('changes several fields at once', async () => {
      const created = await createEndpoint(t);
      const res = await t.call('PATCH', url(created.id), t.keys.tenant, {
        url: 'https://x.example.com/a',
        events: ['organizationMembership.*'],
        description: 'all three',
      });
      expect(expectEndpoint(res)).toMatchObject({
        url: 'https://x.example.com/a',
        events: ['organizationMembership.*'],
        description: 'all three',
        status: 'active',
      });
    });

    it('re-enables a disabled endpoint with {"status": "active"}', async () => {
      const created = await createEndpoint(t);
      expect(await disableEndpoint(t.service.ctx.db, created.id, 'answered 410 Gone', clock.now())).toBe(
        true,
      );
      const disabled = expectEndpoint(await t.call('GET', url(created.id), t.keys.tenant));
      expect(disabled).toMatchObject({ status: 'disabled', disabled_reason: 'answered 410 Gone' });

      // Other changes leave it disabled.
      const described = expectEndpoint(
        await t.call('PATCH', url(created.id), t.keys.tenant, { description: 'still off' }),
      );
      expect(described).toMatchObject({ status: 'disabled', disabled_reason: 'answered 410 Gone' });

      const enabled = expectEndpoint(
        await t.call('PATCH', url(created.id), t.keys.tenant, { status: 'active' }),
      );
      expect(enabled).toMatchObject({ status: 'active', disabled_reason: null, description: 'still off' });
      expect(expectEndpoint(await t.call('GET', url(created.id), t.keys.tenant)).status).toBe('active');
    });

    it('accepts {"status": "active"} on an endpoint that is already active', async () => {
      const created = await createEndpoint(t);
      const res = await t.call('PATCH', url(created.id), t.keys.tenant, { status: 'active' });
      expect(expectEndpoint(res).status).toBe('active');
    });

    it.each([['disabled'], ['deleted'], ['ACTIVE'], [''], [null], [true]])(
      'refuses {"status": %j} with 400 validation_failed',
      async (status) => {
        const created = await createEndpoint(t);
        expectError(
          await t.call('PATCH', url(created.id), t.keys.tenant, { status }),
          400,
          'validation_failed',
        );
        expect(expectEndpoint(await t.call('GET', url(created.id), t.keys.tenant)).status).toBe('active');
      },
    );

    it('refuses an empty patch and a patch with no body with 400', async () => {
      const created = await createEndpoint(t);
      expectError(await t.call('PATCH', url(created.id), t.keys.tenant, {}), 400, 'validation_failed');
      expectError(await t.call('PATCH', url(created.id), t.keys.tenant), 400, 'validation_failed');
    });

    it('refuses to change a deleted endpoint with 409 endpoint_deleted, and changes nothing', async () => {
      const created = await createEndpoint(t, { description: 'keep' });
      expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant));
      for (const patch of [{ description: 'changed' }, { status: 'active' }, { events: ['user.*'] }]) {
        expectError(await t.call('PATCH', url(created.id), t.keys.tenant, patch), 409, 'endpoint_deleted');
      }
      const got = expectEndpoint(await t.call('GET', url(created.id), t.keys.tenant));
      expect(got).toMatchObject({ status: 'deleted', description: 'keep', events: ['*'] });
    });

    it('answers 404 for an unknown id', async () => {
      expectError(
        await t.call('PATCH', url('webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV'), t.keys.tenant, { description: 'x' }),
        404,
        'not_found',
      );
    });
  });

  describe('DELETE /v1/webhooks/:id', () => {
    it('answers 200 with status deleted, and is idempotent', async () => {
      const created = await createEndpoint(t);
      clock.advance(5000);
      const deleted = expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant));
      expect(deleted).toMatchObject({ id: created.id, status: 'deleted', url: created.url });
      expect(deleted.updated_at).toBe(new Date(clock.now()).toISOString());

      clock.advance(5000);
      const again = expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant));
      expect(again).toEqual(deleted);
      expect(expectEndpoint(await t.call('GET', url(created.id), t.keys.tenant))).toEqual(deleted);
    });

    it('deletes a disabled endpoint too', async () => {
      const created = await createEndpoint(t);
      await disableEndpoint(t.service.ctx.db, created.id, 'gone', clock.now());
      expect(expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant)).status).toBe('deleted');
    });

    it('cancels the pending deliveries of that endpoint only', async () => {
      const tenant = await t.keyFor('tenant', 'cancel-co');
      const doomed = await createEndpoint(t, { key: tenant, events: ['user.updated'] });
      const kept = await createEndpoint(t, { key: tenant, events: ['user.*'] });
      const emitted = await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'cancel-co',
        type: 'user.updated',
        data: { userId: 'user_1' },
      });
      expect(emitted.statusCode, emitted.body).toBe(202);
      const { id: messageId } = emitted.json() as { id: string };
      // Fanned out by the emit itself (SQLite, a tenant with few endpoints) or by the next batch.
      const deliveries = () =>
        t.service.ctx.db.all<{ endpoint_id: string; status: string }>(
          'SELECT endpoint_id, status FROM deliveries WHERE message_id = $1 ORDER BY endpoint_id',
          [messageId],
        );
      await fanOutBatch(t.service.ctx);
      expect(await deliveries()).toEqual(
        [
          { endpoint_id: doomed.id, status: 'pending' },
          { endpoint_id: kept.id, status: 'pending' },
        ].sort((x, y) => (x.endpoint_id < y.endpoint_id ? -1 : 1)),
      );

      expectEndpoint(await t.call('DELETE', url(doomed.id), tenant));
      expect(await deliveries()).toEqual(
        [
          { endpoint_id: doomed.id, status: 'cancelled' },
          { endpoint_id: kept.id, status: 'pending' },
        ].sort((x, y) => (x.endpoint_id < y.endpoint_id ? -1 : 1)),
      );
    });

    it('answers 404 for an unknown id', async () => {
      expectError(
        await t.call('DELETE', url('webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV'), t.keys.tenant),
        404,
        'not_found',
      );
    });
  });

  describe('POST /v1/webhooks/:id/restore', () => {
    it('reactivates a deleted endpoint with 200 and status active', async () => {
      const created = await createEndpoint(t, { description: 'back again', events: ['organization.*'] });
      expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant));
      clock.advance(60_000);
      const restored = expectEndpoint(await t.call('POST', url(created.id, '/restore'), t.keys.tenant));
      const { signing_secret, ...view } = created;
      expect(restored).toEqual({ ...view, updated_at: new Date(clock.now()).toISOString() });
      expect(expectEndpoint(await t.call('GET', url(created.id), t.keys.tenant)).status).toBe('active');
      // Restoring keeps the secret: subscribers need not reconfigure.
      expect(await storedSecrets(t, created.id)).toEqual([signing_secret]);
      // And the endpoint can be changed again.
      const patched = await t.call('PATCH', url(created.id), t.keys.tenant, { description: 'x' });
      expect(expectEndpoint(patched).description).toBe('x');
    });

    it('restores an endpoint that was disabled before it was deleted to active', async () => {
      const created = await createEndpoint(t);
      await disableEndpoint(t.service.ctx.db, created.id, 'kept failing', clock.now());
      expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant));
      const restored = expectEndpoint(await t.call('POST', url(created.id, '/restore'), t.keys.tenant));
      expect(restored).toMatchObject({ status: 'active', disabled_reason: null });
    });

    it('works with an empty JSON body and with {}', async () => {
      const created = await createEndpoint(t);
      expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant));
      const res = await rawRequest(t, 'POST', url(created.id, '/restore'), t.keys.tenant, '');
      expect(expectEndpoint(res).status).toBe('active');
      expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant));
      expect(
        expectEndpoint(await t.call('POST', url(created.id, '/restore'), t.keys.tenant, {})).status,
      ).toBe('active');
    });

    it('answers 409 endpoint_not_deleted for an active or a disabled endpoint, changing nothing', async () => {
      const active = await createEndpoint(t);
      expectError(
        await t.call('POST', url(active.id, '/restore'), t.keys.tenant),
        409,
        'endpoint_not_deleted',
      );
      const disabled = await createEndpoint(t);
      await disableEndpoint(t.service.ctx.db, disabled.id, 'gone', clock.now());
      expectError(
        await t.call('POST', url(disabled.id, '/restore'), t.keys.tenant),
        409,
        'endpoint_not_deleted',
      );
      expect(expectEndpoint(await t.call('GET', url(disabled.id), t.keys.tenant)).status).toBe('disabled');
    });

    it('answers 409 on a second restore', async () => {
      const created = await createEndpoint(t);
      expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant));
      expectEndpoint(await t.call('POST', url(created.id, '/restore'), t.keys.tenant));
      expectError(
        await t.call('POST', url(created.id, '/restore'), t.keys.tenant),
        409,
        'endpoint_not_deleted',
      );
    });

    it('answers 404 for an unknown id', async () => {
      expectError(
        await t.call('POST', url('webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV', '/restore'), t.keys.tenant),
        404,
        'not_found',
      );
    });
  });

  describe('POST /v1/webhooks/:id/rotate-secret', () => {
    it('answers 200 {id, signing_secret} with a new secret when sent no body at all', async () => {
      const created = await createEndpoint(t);
      const res = await t.inject({
        method: 'POST',
        url: url(created.id, '/rotate-secret'),
        headers: { authorization: `Bearer ${t.keys.tenant}` },
      });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as { id: string; signing_secret: string };
      expect(Object.keys(body).sort()).toEqual(['id', 'signing_secret']);
      expect(body.id).toBe(created.id);
      expectSecretShape(body.signing_secret);
      expect(body.signing_secret).not.toBe(created.signing_secret);
      // Default grace is 0: only the new secret signs from now on.
      expect(await storedSecrets(t, created.id)).toEqual([body.signing_secret]);
    });

    it('accepts an empty body with content-type JSON, and {}', async () => {
      const created = await createEndpoint(t);
      const empty = await rawRequest(t, 'POST', url(created.id, '/rotate-secret'), t.keys.tenant, '');
      expect(empty.statusCode, empty.body).toBe(200);
      const first = (empty.json() as { signing_secret: string }).signing_secret;
      expectSecretShape(first);
      const braces = await t.call('POST', url(created.id, '/rotate-secret'), t.keys.tenant, {});
      expect(braces.statusCode, braces.body).toBe(200);
      const second = (braces.json() as { signing_secret: string }).signing_secret;
      expect(new Set([created.signing_secret, first, second]).size).toBe(3);
      expect(await storedSecrets(t, created.id)).toEqual([second]);
    });

    it('keeps the old secret signing during the grace period, then only the new one', async () => {
      const created = await createEndpoint(t);
      const res = await t.call('POST', url(created.id, '/rotate-secret'), t.keys.tenant, {
        grace_period_seconds: 3600,
      });
      expect(res.statusCode, res.body).toBe(200);
      const { signing_secret } = res.json() as { signing_secret: string };
      const now = clock.now();
      expect(await storedSecrets(t, created.id, now)).toEqual([signing_secret, created.signing_secret]);
      expect(await storedSecrets(t, created.id, now + 3_599_999)).toEqual([
        signing_secret,
        created.signing_secret,
      ]);
      expect(await storedSecrets(t, created.id, now + 3_600_000)).toEqual([signing_secret]);
    });

    it('ends an earlier grace period: never more than two secrets', async () => {
      const created = await createEndpoint(t);
      const rotate = async (body: unknown) => {
        const res = await t.call('POST', url(created.id, '/rotate-secret'), t.keys.tenant, body);
        expect(res.statusCode, res.body).toBe(200);
        return (res.json() as { signing_secret: string }).signing_secret;
      };
      const s1 = await rotate({ grace_period_seconds: 604_800 });
      const s2 = await rotate({ grace_period_seconds: 604_800 });
      expect(await storedSecrets(t, created.id)).toEqual([s2, s1]);
      const s3 = await rotate({ grace_period_seconds: 0 });
      expect(await storedSecrets(t, created.id)).toEqual([s3]);
      expect(new Set([created.signing_secret, s1, s2, s3]).size).toBe(4);
    });

    it.each([[-1], [604_801], [1.5], ['60'], [null], [true]])(
      'refuses grace_period_seconds %j with 400 and keeps the secret',
      async (grace) => {
        const created = await createEndpoint(t);
        const res = await t.call('POST', url(created.id, '/rotate-secret'), t.keys.tenant, {
          grace_period_seconds: grace,
        });
        expectError(res, 400, 'validation_failed');
        expect(await storedSecrets(t, created.id)).toEqual([created.signing_secret]);
      },
    );

    it('refuses unknown fields and non-object bodies with 400', async () => {
      const created = await createEndpoint(t);
      for (const body of [{ grace: 5 }, [], 'x', 7, true]) {
        expectError(
          await t.call('POST', url(created.id, '/rotate-secret'), t.keys.tenant, JSON.stringify(body)),
          400,
          'validation_failed',
        );
      }
      expect(await storedSecrets(t, created.id)).toEqual([created.signing_secret]);
    });

    it('rotates the secret of a deleted endpoint (it still exists)', async () => {
      const created = await createEndpoint(t);
      expectEndpoint(await t.call('DELETE', url(created.id), t.keys.tenant));
      const res = await t.call('POST', url(created.id, '/rotate-secret'), t.keys.tenant, {});
      expect(res.statusCode, res.body).toBe(200);
      expect(expectEndpoint(await t.call('GET', url(created.id), t.keys.tenant)).status).toBe('deleted');
    });

    it('answers 404 for an unknown id', async () => {
      expectError(
        await t.call('POST', url('webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV', '/rotate-secret'), t.keys.tenant, {}),
        404,
        'not_found',
      );
    });
  });

  it('shows the secret only at create and rotate, never in get, list, patch, delete or restore', async () => {
    const tenant = await t.keyFor('tenant', 'secretive');
    const created = await createEndpoint(t, { key: tenant });
    const rotated = await t.call('POST', url(created.id, '/rotate-secret'), tenant, {
      grace_period_seconds: 60,
    });
    const secrets = [created.signing_secret, (rotated.json() as { signing_secret: string }).signing_secret];
    const answers = [
      await t.call('GET', url(created.id), tenant),
      await t.call('GET', '/v1/webhooks', tenant),
      await t.call('GET', '/v1/webhooks?status=active', tenant),
      await t.call('PATCH', url(created.id), tenant, { description: 'p' }),
      await t.call('DELETE', url(created.id), tenant),
      await t.call('GET', '/v1/webhooks?status=deleted', tenant),
      await t.call('POST', url(created.id, '/restore'), tenant),
    ];
    for (const res of answers) {
      expect(res.statusCode, res.body).toBe(200);
      expect(res.body).not.toContain('signing_secret');
      expect(res.body).not.toContain('whsec_');
      for (const secret of secrets) {
        expect(res.body).not.toContain(secret);
        expect(res.body).not.toContain(secret.slice(6));
      }
    }
    const list = answers[1]!.json() as { data: EndpointJson[] };
    expect(list.data.map((e) => e.id)).toEqual([created.id]);
    list.data.forEach(expectEndpointShape);
  });
});
