// What endpoint state does to deliveries: 410 Gone disables the endpoint (and re-enabling resumes
// what was waiting); deleting an endpoint cancels its pending deliveries and nothing more arrives.
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, deliveriesTo, emit, getEndpoint, queueOf, shownError, sleep } from './support.js';

describe.each(STORE_KINDS)('endpoint state and deliveries on %s', (kind) => {
  let t: TestService | undefined;
  let r: Receiver | undefined;
  afterEach(async () => {
    await r?.close();
    await t?.close();
    r = t = undefined;
  });

  it('410 Gone disables the endpoint with a reason; no more attempts until it is re-enabled', async () => {
    t = await startTestService(kind, { worker: true });
    r = await startReceiver(() => ({ status: 410, body: 'this hook is gone' }));
    const endpoint = await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const hookId = await emit(t, 'user.deactivated', { userId: 'user_1' });

    const view = await eventually(async () => {
      const e = await getEndpoint(t!, endpoint.id);
      return e.status === 'disabled' && e;
    });
    expect(view.disabled_reason).toMatch(/410/);
    await sleep(400);
    expect(r.requests).toHaveLength(1);
    const [row] = await deliveriesTo(t, endpoint.id);
    // Waiting, in a stopped queue, for the endpoint to be re-enabled.
    expect(row).toMatchObject({ status: 'pending', attempts: 1, last_status: 410 });
    expect(await queueOf(t, endpoint.id)).toMatchObject({ active: 0, queued: 1, in_flight: 0 });
    expect(shownError(t, row!)).toBe('HTTP 410: this hook is gone');

    // A later event is not even fanned out to a disabled endpoint.
    await emit(t, 'user.deactivated', { userId: 'user_2' });
    await sleep(200);
    expect(await deliveriesTo(t, endpoint.id)).toHaveLength(1);
    expect(r.requests).toHaveLength(1);

    // Re-enabled, the waiting delivery goes out with the same hook-id.
    r.respond(() => ({ status: 200 }));
    const patched = await t.call('PATCH', `/v1/webhooks/${endpoint.id}`, t.keys.tenant, { status: 'active' });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ status: 'active', disabled_reason: null });
    await r.waitFor(2);
    expect(r.requests[1]!.headers['hook-id']).toBe(hookId);
    await eventually(async () => (await deliveriesTo(t!, endpoint.id))[0]?.status === 'succeeded');
  });

  it('deleting an endpoint cancels its pending deliveries and nothing more arrives there', async () => {
    t = await startTestService(kind, {
      worker: true,
      env: { HOOKLINE_RETRY_BASE_MS: '600', HOOKLINE_RETRY_MAX_MS: '600', HOOKLINE_MAX_RETRIES: '5' },
    });
    r = await startReceiver(() => ({ status: 500 }));
    const endpoint = await createEndpoint(t, { url: r.url, events: ['*'] });
    const other = await startReceiver();
    try {
      const bystander = await createEndpoint(t, { url: other.url, events: ['*'] });
      for (let i = 0; i < 3; i++) await emit(t, 'organizationMembership.updated', { i });
      await r.waitFor(3);
      // All three are now waiting for their first retry (600 ms ± 25 %).
      await eventually(async () => {
        const rows = await deliveriesTo(t!, endpoint.id);
        return rows.length === 3 && rows.every((d) => d.status === 'pending');
      });
      const deleted = await t.call('DELETE', `/v1/webhooks/${endpoint.id}`, t.keys.tenant);
      expect(deleted.statusCode).toBe(200);
      expect(deleted.json().status).toBe('deleted');
      const seen = r.requests.length;

      const rows = await deliveriesTo(t, endpoint.id);
      expect(rows.map((d) => d.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
      expect(rows.every((d) => d.completed_at !== null && d.attempts === 1)).toBe(true);

      await emit(t, 'organizationMembership.updated', { i: 'after' });
      await other.waitFor(4);
      await sleep(900); // beyond every retry the cancelled deliveries would have made
      expect(r.requests).toHaveLength(seen);
      expect(await deliveriesTo(t, endpoint.id)).toHaveLength(3);
      expect((await deliveriesTo(t, bystander.id)).every((d) => d.status === 'succeeded')).toBe(true);
    } finally {
      await other.close();
    }
  });

  it('an attempt in flight when its endpoint is deleted does not resurrect the delivery', async () => {
    t = await startTestService(kind, { worker: true });
    r = await startReceiver(() => ({ status: 500, delayMs: 300 }));
    const endpoint = await createEndpoint(t, { url: r.url, events: ['*'] });
    await emit(t, 'user.created', { userId: 'user_inflight' });
    await r.waitFor(1);
    expect((await deliveriesTo(t, endpoint.id))[0]?.status).toBe('delivering');
    expect((await t.call('DELETE', `/v1/webhooks/${endpoint.id}`, t.keys.tenant)).statusCode).toBe(200);
    expect((await deliveriesTo(t, endpoint.id))[0]?.status).toBe('cancelled');
    // The answer arrives after the cancellation; its outcome must not overwrite it.
    await sleep(600);
    const [row] = await deliveriesTo(t, endpoint.id);
    expect(row).toMatchObject({ status: 'cancelled', attempts: 1 });
    expect(r.requests).toHaveLength(1);
  });

  it('a restored endpoint receives new events but not the cancelled ones', async () => {
    // The retry is far enough out that it cannot already be on the wire when the DELETE lands, even
    // on a loaded machine: an attempt in flight at deletion time may still arrive.
    t = await startTestService(kind, {
      worker: true,
      env: { HOOKLINE_RETRY_BASE_MS: '5000', HOOKLINE_RETRY_MAX_MS: '5000' },
    });
    r = await startReceiver((_req, i) => ({ status: i === 0 ? 500 : 200 }));
    const endpoint = await createEndpoint(t, { url: r.url, events: ['*'] });
    const first = await emit(t, 'user.updated', { n: 1 });
    await r.waitFor(1);
    expect((await t.call('DELETE', `/v1/webhooks/${endpoint.id}`, t.keys.tenant)).statusCode).toBe(200);
    const restored = await t.call('POST', `/v1/webhooks/${endpoint.id}/restore`, t.keys.tenant);
    expect(restored.statusCode).toBe(200);
    const second = await emit(t, 'user.updated', { n: 2 });
    await r.waitFor(2);
    await sleep(900);
    expect(r.requests.map((q) => q.headers['hook-id'])).toEqual([first, second]);
    // The first message's delivery stays cancelled: restoring does not bring it back.
    const rows = await deliveriesTo(t, endpoint.id);
    expect(rows.find((d) => d.message_id === first)?.status).toBe('cancelled');
    expect(rows.find((d) => d.message_id === second)?.status).toBe('succeeded');
  });
});
