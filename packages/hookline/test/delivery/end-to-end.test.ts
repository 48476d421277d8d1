// An event emitted through the API reaches every matching endpoint exactly once, and nothing else,
// as the POST docs/contract.md §5 describes, verifiable with @hookline/consumer.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disableEndpoint } from '../../src/store/endpoints.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import {
  HOOK_HEADERS,
  TRANSPORT_HEADERS,
  createEndpoint,
  deliveriesOf,
  emit,
  marker,
  sleep,
  verifyRequest,
  type CreatedEndpoint,
} from './support.js';

const VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

describe.each(STORE_KINDS)('end-to-end delivery on %s', (kind) => {
  let t: TestService;
  const receivers: Receiver[] = [];
  const receiver = async () => {
    const r = await startReceiver();
    receivers.push(r);
    return r;
  };

  beforeAll(async () => {
    t = await startTestService(kind, { worker: true });
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await t.close();
  });

  it('a user.created reaches exactly the matching endpoints, once each, signed as docs/contract.md §5 says', async () => {
    const subscriptions: Record<string, string[]> = {
      userWildcard: ['user.*'],
      everything: ['*'],
      exact: ['user.created'],
      organizations: ['organization.*'],
      otherUserEvent: ['user.deleted'],
      deleted: ['*'],
      disabled: ['user.*'],
    };
    const endpoints: Record<string, { endpoint: CreatedEndpoint; receiver: Receiver }> = {};
    for (const [name, events] of Object.entries(subscriptions)) {
      const r = await receiver();
      endpoints[name] = { receiver: r, endpoint: await createEndpoint(t, { url: r.url, events }) };
    }
    const otherTenant = await receiver();
    const otherEndpoint = await createEndpoint(t, {
      url: otherTenant.url,
      events: ['*'],
      key: await t.keyFor('tenant', 'globex'),
    });
    expect(
      (await t.call('DELETE', `/v1/webhooks/${endpoints.deleted!.endpoint.id}`, t.keys.tenant)).statusCode,
    ).toBe(200);
    expect(await disableEndpoint(t.service.ctx.db, endpoints.disabled!.endpoint.id, 'test', Date.now())).toBe(
      true,
    );

    const data = { userId: 'user_29wBfx', email: 'ada@example.com', note: marker() };
    const before = Date.now();
    const hookId = await emit(t, 'user.created', data);

    const matching = ['userWildcard', 'everything', 'exact'];
    await Promise.all(matching.map((name) => endpoints[name]!.receiver.waitFor(1, 10_000)));
    await eventually(async () => {
      const rows = await deliveriesOf(t, hookId);
      return rows.length === 3 && rows.every((r) => r.status === 'succeeded');
    });
    // Long enough for a duplicate or a stray delivery to show up.
    await sleep(300);

    const expectedBody = JSON.stringify({ type: 'user.created', data });
    for (const name of matching) {
      const { receiver: r, endpoint } = endpoints[name]!;
      expect(r.requests, name).toHaveLength(1);
      const req = r.requests[0]!;
      expect(req.method).toBe('POST');
      expect(req.path).toBe('/hook');
      expect(req.body).toBe(expectedBody);
      const names = Object.keys(req.headers)
        .filter((h) => !TRANSPORT_HEADERS.includes(h))
        .sort();
      expect(names).toEqual([...HOOK_HEADERS].sort());
      expect(req.headers['content-type']).toBe('application/json');
      expect(req.headers['hook-id']).toBe(hookId);
      expect(req.headers['service-webhook-event']).toBe('user.created');
      expect(req.headers['user-agent']).toBe(`hookline/${VERSION}`);
      const timestamp = Number(req.headers['hook-timestamp']);
      expect(req.headers['hook-timestamp']).toMatch(/^\d+$/);
      expect(timestamp).toBeGreaterThanOrEqual(Math.floor(before / 1000) - 1);
      expect(timestamp).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 1);
      expect(req.headers['hook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(Number(req.headers['content-length'])).toBe(Buffer.byteLength(expectedBody));

      const verified = verifyRequest(req, endpoint.signing_secret);
      expect(verified).toEqual({ id: hookId, timestamp, type: 'user.created', data });
      // Another endpoint's secret does not verify it.
      const foreign = endpoints[name === 'exact' ? 'everything' : 'exact']!.endpoint.signing_secret;
      expect(() => verifyRequest(req, foreign)).toThrow(/No signature matches/);
    }
    for (const name of ['organizations', 'otherUserEvent', 'deleted', 'disabled']) {
      expect(endpoints[name]!.receiver.requests, name).toHaveLength(0);
    }
    expect(otherTenant.requests).toHaveLength(0);

    const rows = await deliveriesOf(t, hookId);
    expect(rows.map((r) => r.endpoint_id).sort()).toEqual(
      matching.map((n) => endpoints[n]!.endpoint.id).sort(),
    );
    for (const row of rows) {
      expect(row).toMatchObject({ status: 'succeeded', attempts: 1, last_status: 200, last_error: null });
      expect(row.tenant_id).toBe('acme');
      expect(row.event_type).toBe('user.created');
    }
    expect(rows.some((r) => r.endpoint_id === otherEndpoint.id)).toBe(false);
  });

  it('the same hook-id goes to every endpoint; each signature verifies only with its own secret', async () => {
    const a = await receiver();
    const b = await receiver();
    const ea = await createEndpoint(t, { url: a.url, events: ['organizationInvitation.revoked'] });
    const eb = await createEndpoint(t, { url: b.url, events: ['organizationInvitation.revoked'] });
    const id = await emit(t, 'organizationInvitation.revoked', { invitationId: 'inv_1' });
    const [ra] = await a.waitFor(1);
    const [rb] = await b.waitFor(1);
    expect(ra!.headers['hook-id']).toBe(id);
    expect(rb!.headers['hook-id']).toBe(id);
    expect(ra!.body).toBe(rb!.body);
    expect(verifyRequest(ra!, ea.signing_secret).type).toBe('organizationInvitation.revoked');
    expect(verifyRequest(rb!, eb.signing_secret).data).toEqual({ invitationId: 'inv_1' });
    expect(() => verifyRequest(ra!, eb.signing_secret)).toThrow();
  });

  it('wildcards: organization.* takes dotted organization events but not memberships or invitations', async () => {
    const subscriptions: Record<string, string[]> = {
      organization: ['organization.*'],
      membership: ['organizationMembership.*'],
      invitation: ['organizationInvitation.created', 'organizationInvitation.accepted'],
      everything: ['*'],
      user: ['user.*'],
      mixed: ['organization.created', 'organizationMembership.deleted'],
    };
    const got: Record<string, Receiver> = {};
    const secrets: Record<string, string> = {};
    for (const [name, events] of Object.entries(subscriptions)) {
      got[name] = await receiver();
      secrets[name] = (await createEndpoint(t, { url: got[name].url, events })).signing_secret;
    }
    const types = [
      'organization.created',
      'organization.auth_policy.updated',
      'organization.outbound_saml_app.deleted',
      'organizationMembership.created',
      'organizationMembership.deleted',
      'organizationInvitation.accepted',
      'organizationInvitation.revoked',
      'connection.saml_certificate_renewed',
    ];
    for (const type of types) await emit(t, type, { n: type });

    const expected: Record<string, string[]> = {
      organization: [
        'organization.created',
        'organization.auth_policy.updated',
        'organization.outbound_saml_app.deleted',
      ],
      membership: ['organizationMembership.created', 'organizationMembership.deleted'],
      invitation: ['organizationInvitation.accepted'],
      everything: types,
      user: [],
      mixed: ['organization.created', 'organizationMembership.deleted'],
    };
    for (const [name, list] of Object.entries(expected)) {
      if (list.length > 0) await got[name]!.waitFor(list.length, 10_000);
    }
    await sleep(300);
    for (const [name, list] of Object.entries(expected)) {
      const received = got[name]!.requests.map((r) => r.headers['service-webhook-event']);
      expect(received.slice().sort(), name).toEqual(list.slice().sort());
      for (const req of got[name]!.requests) {
        const event = verifyRequest(req, secrets[name]!);
        expect(event.type).toBe(req.headers['service-webhook-event']);
        expect(event.data).toEqual({ n: event.type });
      }
    }
  });
});
