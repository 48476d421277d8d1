// POST /v1/webhooks/:id/test (docs/contract.md §4.1): one signed delivery of a catalogue example, to
// that endpoint alone, through the same queue, signing and headers; a paused endpoint gets it when
// resumed; one that dies is not dead-lettered (docs/operators.md, "Test events").
import { afterEach, describe, expect, it } from 'vitest';
import { CATALOGUE, matchesEventFilter } from '../../src/catalogue/index.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { expectError } from '../api/support.js';
import { deadLettersOf, deliveriesOf, emit, verifies } from './support.js';

const firstMatching = (filters: string[]) => CATALOGUE.find((e) => matchesEventFilter(filters, e.name))!;

describe.each(STORE_KINDS)('test events on %s', (kind) => {
  let t: TestService | undefined;
  const receivers: Receiver[] = [];
  afterEach(async () => {
    for (const r of receivers.splice(0)) await r.close();
    await t?.close();
    t = undefined;
  });

  async function receiver(status = 200) {
    const r = await startReceiver(() => ({ status }));
    receivers.push(r);
    return r;
  }
  async function endpointAt(s: TestService, url: string, events: string[], extra: object = {}) {
    const res = await s.call('POST', '/v1/webhooks', s.keys.tenant, { url, events, ...extra });
    expect(res.statusCode, res.body).toBe(201);
    return res.json<{ id: string; signing_secret: string }>();
  }
  const sendTest = (s: TestService, id: string, body?: object) =>
    s.call('POST', `/v1/webhooks/${id}/test`, s.keys.tenant, body);

  it('delivers the first subscribed catalogue example, signed and with the custom headers, to that endpoint alone', async () => {
    const s = (t = await startTestService(kind, { worker: true }));
    const r = await receiver();
    const bystander = await receiver();
    const filters = ['organizationMembership.*', 'organization.*'];
    const endpoint = await endpointAt(s, r.url, filters, { headers: { 'x-token': 'abc' } });
    await endpointAt(s, bystander.url, ['*']);

    // No body at all, as a curl user would send it.
    const res = await s.inject({
      method: 'POST',
      url: `/v1/webhooks/${endpoint.id}/test`,
      headers: { authorization: `Bearer ${s.keys.tenant}` },
    });
    expect(res.statusCode, res.body).toBe(202);
    const { id } = res.json<{ id: string }>();
    expect(Object.keys(res.json())).toEqual(['id']);
    expect(id).toMatch(/^msg_/);

    const [req] = await r.waitFor(1);
    const expected = firstMatching(filters);
    // Catalogue order, not the order of the filters.
    expect(expected.name.startsWith('organization.')).toBe(true);
    expect(req!.headers['hook-id']).toBe(id);
    expect(req!.headers['service-webhook-event']).toBe(expected.name);
    expect(req!.headers['x-token']).toBe('abc');
    expect(JSON.parse(req!.body)).toEqual({ type: expected.name, data: expected.example });
    expect(verifies(req!, endpoint.signing_secret)).toBe(true);

    // The bystander, subscribed to everything, gets the real event emitted after the test one and
    // nothing before it: the test message was never fanned out to it.
    const real = await emit(s, 'organization.created', { organizationId: 'org_1' });
    const [first] = await bystander.waitFor(1);
    expect(first!.headers['hook-id']).toBe(real);
    expect((await deliveriesOf(s, id)).map((d) => d.endpoint_id)).toEqual([endpoint.id]);
    await r.waitFor(2);
    expect(bystander.requests.map((q) => q.headers['hook-id'])).toEqual([real]);
  });

  it('sends the type asked for; refuses types outside the catalogue or the filter, deleted and unknown endpoints', async () => {
    const s = (t = await startTestService(kind, { worker: true }));
    const r = await receiver();
    const endpoint = await endpointAt(s, r.url, ['user.*']);
    const asked = await sendTest(s, endpoint.id, { type: 'user.deactivated' });
    expect(asked.statusCode, asked.body).toBe(202);
    const [req] = await r.waitFor(1);
    expect(req!.headers['hook-id']).toBe(asked.json().id);
    expect(JSON.parse(req!.body).type).toBe('user.deactivated');

    const unknown = await sendTest(s, endpoint.id, { type: 'user.creatd' });
    expectError(unknown, 400, 'unknown_event_type');
    expect(unknown.json().error.message).toContain('user.created');
    const outside = await sendTest(s, endpoint.id, { type: 'organization.created' });
    expectError(outside, 400, 'unknown_event_type');
    expect(outside.json().error.message).toContain("not among this endpoint's events");
    expectError(await sendTest(s, endpoint.id, { type: 42 }), 400, 'validation_failed');
    expectError(await sendTest(s, endpoint.id, { kind: 'x' }), 400, 'validation_failed');
    expectError(await sendTest(s, 'webhook_01ARZ3NDEKTSV4RRFFQ69G5FAV'), 404, 'not_found');

    expect((await s.call('DELETE', `/v1/webhooks/${endpoint.id}`, s.keys.tenant)).statusCode).toBe(200);
    expectError(await sendTest(s, endpoint.id), 409, 'endpoint_deleted');
  });

  it('a paused endpoint gets its test event when resumed', async () => {
    const s = (t = await startTestService(kind, { worker: true }));
    const r = await receiver();
    const control = await receiver();
    const endpoint = await endpointAt(s, r.url, ['user.*']);
    const other = await endpointAt(s, control.url, ['user.*']);
    await s.call('PATCH', `/v1/webhooks/${endpoint.id}`, s.keys.tenant, { status: 'paused' });
    const { id } = (await sendTest(s, endpoint.id)).json<{ id: string }>();
    // The control endpoint's own test event going through shows the worker claimed meanwhile.
    await sendTest(s, other.id);
    await control.waitFor(1);
    expect(r.requests).toHaveLength(0);
    expect((await deliveriesOf(s, id))[0]?.status).toBe('pending');
    await s.call('PATCH', `/v1/webhooks/${endpoint.id}`, s.keys.tenant, { status: 'active' });
    const [req] = await r.waitFor(1);
    expect(req!.headers['hook-id']).toBe(id);
  });

  it('a test event that runs out of attempts ends dead without a dead letter; a real one gets one', async () => {
    const s = (t = await startTestService(kind, { worker: true }));
    const r = await receiver(500);
    const endpoint = await endpointAt(s, r.url, ['user.*']);
    const { id } = (await sendTest(s, endpoint.id)).json<{ id: string }>();
    const real = await emit(s, 'user.deactivated', { userId: 'user_1' });
    const attempts = 1 + s.config.maxRetries;
    for (const hookId of [id, real]) {
      await eventually(async () => {
        const [d] = await deliveriesOf(s, hookId);
        return d?.status === 'dead' && d;
      });
    }
    const [test] = await deliveriesOf(s, id);
    expect(test).toMatchObject({ status: 'dead', attempts, last_status: 500 });
    expect(r.requests.filter((q) => q.headers['hook-id'] === id)).toHaveLength(attempts);
    expect(await deadLettersOf(s, id)).toHaveLength(0);
    // Positive control: the same failure of a real event is dead-lettered.
    expect(await deadLettersOf(s, real)).toHaveLength(1);
  });
});
