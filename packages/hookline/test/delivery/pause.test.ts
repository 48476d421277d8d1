// The tenant's pause (docs/contract.md §4.1): a paused endpoint gets no attempts, but events keep being
// fanned out to it and wait; resumed, it gets them all, each ordering key's in emit order, starting
// from the initial adaptive limit rather than all at once.
import { afterEach, describe, expect, it } from 'vitest';
import { INITIAL_CONCURRENCY } from '../../src/store/endpoint-queues.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, deliveriesTo, emit, getEndpoint, queueOf } from './support.js';

describe.each(STORE_KINDS)('pausing an endpoint on %s', (kind) => {
  let t: TestService | undefined;
  const receivers: Receiver[] = [];
  afterEach(async () => {
    for (const r of receivers.splice(0)) await r.close();
    await t?.close();
    t = undefined;
  });

  const patch = (s: TestService, id: string, body: unknown) =>
    s.call('PATCH', `/v1/webhooks/${id}`, s.keys.tenant, body);

  it('no attempts while paused, events still fanned out; resume delivers all, keyed ones in order', async () => {
    const s = (t = await startTestService(kind, { worker: true }));
    const paused = await startReceiver();
    const control = await startReceiver();
    receivers.push(paused, control);
    const endpoint = await createEndpoint(s, { url: paused.url, events: ['user.*'] });
    // The control endpoint gets the same events: its deliveries prove the worker kept claiming while
    // the paused endpoint's deliveries stayed due.
    await createEndpoint(s, { url: control.url, events: ['user.*'] });

    const answer = await patch(s, endpoint.id, { status: 'paused' });
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.json()).toMatchObject({ status: 'paused', disabled_reason: null });
    expect((await getEndpoint(s, endpoint.id)).status).toBe('paused');
    const listed = await s.call('GET', '/v1/webhooks?status=paused', s.keys.tenant);
    expect(listed.json().data.map((e: { id: string }) => e.id)).toEqual([endpoint.id]);

    // Events keep arriving for at least 3 s (the "0 attempts for 3 s"); each round waits for
    // the control endpoint to have received it, so the worker has run claims over the paused
    // endpoint's due deliveries every round.
    const keys = ['k1', 'k2'];
    const sent: { key: string | null; n: number }[] = [];
    const pausedAt = Date.now();
    for (let round = 0; round < 5 || Date.now() - pausedAt < 3000; round++) {
      for (const key of [...keys, null]) {
        const res = await s.call('POST', '/v1/events', s.keys.producer, {
          tenant_id: 'acme',
          type: 'user.updated',
          data: { key, n: round },
          ...(key ? { ordering_key: key } : {}),
        });
        expect(res.statusCode, res.body).toBe(202);
        sent.push({ key, n: round });
      }
      await control.waitFor(sent.length);
    }
    expect(paused.requests).toHaveLength(0);
    const waiting = await deliveriesTo(s, endpoint.id);
    expect(waiting).toHaveLength(sent.length);
    // Waiting: pending (due) or held behind an earlier one of their key; never attempted.
    expect(waiting.every((d) => ['pending', 'held'].includes(d.status) && d.attempts === 0)).toBe(true);
    expect(await queueOf(s, endpoint.id)).toMatchObject({ active: 0, queued: sent.length, in_flight: 0 });

    const resumed = await patch(s, endpoint.id, { status: 'active' });
    expect(resumed.statusCode, resumed.body).toBe(200);
    expect(resumed.json().status).toBe('active');
    // It starts again from the initial adaptive limit, not its earlier one: no burst of the backlog.
    expect(Number((await queueOf(s, endpoint.id))!.concurrency_limit)).toBeLessThanOrEqual(
      INITIAL_CONCURRENCY,
    );
    await paused.waitFor(sent.length, 30_000);
    const got = paused.requests.map((r) => JSON.parse(r.body).data as { key: string | null; n: number });
    expect(got).toHaveLength(sent.length);
    for (const key of keys) {
      expect(got.filter((d) => d.key === key).map((d) => d.n)).toEqual(
        sent.filter((d) => d.key === key).map((d) => d.n),
      );
    }
    await eventually(async () => (await deliveriesTo(s, endpoint.id)).every((d) => d.status === 'succeeded'));
  });

  it('pausing a disabled endpoint keeps it quiet and lets events collect; resuming re-enables it', async () => {
    const s = (t = await startTestService(kind, { worker: true }));
    const r = await startReceiver(() => ({ status: 410 }));
    receivers.push(r);
    const endpoint = await createEndpoint(s, { url: r.url, events: ['user.*'] });
    await emit(s, 'user.deactivated', { userId: 'user_1' });
    await eventually(async () => (await getEndpoint(s, endpoint.id)).status === 'disabled');

    const answer = await patch(s, endpoint.id, { status: 'paused' });
    expect(answer.json()).toMatchObject({ status: 'paused', disabled_reason: null });
    // Unlike a disabled endpoint, a paused one is fanned out to.
    await emit(s, 'user.deactivated', { userId: 'user_2' });
    await eventually(async () => (await deliveriesTo(s, endpoint.id)).length === 2);
    expect(r.requests).toHaveLength(1);

    r.respond(() => ({ status: 200 }));
    expect((await patch(s, endpoint.id, { status: 'active' })).json().status).toBe('active');
    await r.waitFor(3);
    await eventually(async () => (await deliveriesTo(s, endpoint.id)).every((d) => d.status === 'succeeded'));
  });
});
