// The circuit breaker: a long-failing endpoint's queue is paused, out of the claims' way, probes find
// out when it is back, and then everything is delivered.
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { countAwaitingFanout } from '../../src/store/messages.js';
import { queueOf } from './support.js';

describe.each(STORE_KINDS)('circuit breaker on %s', (kind) => {
  let t: TestService | undefined;
  const receivers: Receiver[] = [];
  afterEach(async () => {
    for (const r of receivers.splice(0)) await r.close();
    await t?.close();
    t = undefined;
  });

  const statusCounts = async (endpointId: string) => {
    const rows = await t!.service.ctx.db.all<{ status: string; n: number }>(
      'SELECT status, COUNT(*) AS n FROM deliveries WHERE endpoint_id = $1 GROUP BY status',
      [endpointId],
    );
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])) as Record<string, number>;
  };
  const circuit = async (endpointId: string) =>
    (
      await t!.service.ctx.db.one<{ circuit_open_until: number | null }>(
        'SELECT circuit_open_until FROM endpoints WHERE id = $1',
        [endpointId],
      )
    )?.circuit_open_until ?? null;
  const emit = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const res = await t!.call('POST', '/v1/events', t!.keys.producer, {
        tenant_id: 'acme',
        type: 'user.updated',
        data: { i },
      });
      expect(res.statusCode).toBe(202);
    }
  };

  it('pauses a long-failing endpoint, probes it, and delivers everything once it answers again', async () => {
    t = await startTestService(kind, {
      worker: true,
      env: { HOOKLINE_CIRCUIT_BREAK_AFTER_MS: '300', HOOKLINE_MAX_RETRIES: '100' },
    });
    let up = false;
    const receiver = await startReceiver(() => ({ status: up ? 200 : 503 }));
    receivers.push(receiver);
    const endpoint = (
      await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: receiver.url, events: ['*'] })
    ).json();
    await emit(10);

    // Failing for longer than the threshold: the circuit opens and the endpoint's queue is paused.
    const until = await eventually(async () => {
      const [open, queue] = [await circuit(endpoint.id), await queueOf(t!, endpoint.id)];
      return (
        open !== null && queue?.paused_until === Number(open) && queue.queued === 10 && queue.paused_until
      );
    });
    expect(until).toBeGreaterThan(Date.now() - 1000);
    // Deliveries fanned out while it is open wait in the paused queue with the rest.
    await emit(5);
    await eventually(async () => (await statusCounts(endpoint.id)).pending === 15);

    up = true;
    const hookIds = await eventually(async () => {
      const counts = await statusCounts(endpoint.id);
      return counts.succeeded === 15 ? receiver.requests.map((r) => r.headers['hook-id']) : undefined;
    }, 20_000);
    expect(new Set(hookIds).size).toBe(15);
    expect(await circuit(endpoint.id)).toBeNull();
  }, 60_000);

  it('keeps a hanging endpoint’s backlog out of the claims while a healthy endpoint is served', async () => {
    t = await startTestService(kind, {
      worker: true,
      env: {
        HOOKLINE_CIRCUIT_BREAK_AFTER_MS: '300',
        HOOKLINE_DELIVERY_TIMEOUT_MS: '150',
        HOOKLINE_MAX_RETRIES: '100',
      },
    });
    const hanging = await startReceiver(() => ({ hang: true }));
    const healthy = await startReceiver();
    receivers.push(hanging, healthy);
    const stuck = (
      await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: hanging.url, events: ['user.deleted'] })
    ).json();
    await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: healthy.url, events: ['user.updated'] });
    for (let i = 0; i < 40; i++) {
      await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.deleted',
        data: { i },
      });
    }
    // Generous: on a loaded two-core machine (the whole suite at once) failures are recorded slowly.
    await eventually(async () => (await circuit(stuck.id)) !== null, 45_000);
    await emit(20);
    await healthy.waitFor(20);
    // The stuck endpoint's 40 deliveries wait in its queue: at most its adaptive limit (shrunk by the
    // time-outs) is in flight for a probe, and the queue's counters match the rows.
    const queue = await queueOf(t, stuck.id);
    const counts = await statusCounts(stuck.id);
    expect(queue!.in_flight).toBeLessThanOrEqual(t.config.endpointConcurrency);
    expect(queue!.concurrency_limit).toBeLessThan(t.config.endpointConcurrency);
    expect(counts.pending).toBeGreaterThan(25);
    expect(queue!.queued).toBe(counts.pending);
  }, 60_000);

  it('holds the deliveries of a disabled endpoint and releases them when it is re-enabled', async () => {
    t = await startTestService(kind, { worker: true });
    let gone = true;
    const receiver = await startReceiver(() => ({ status: gone ? 410 : 200 }));
    receivers.push(receiver);
    const endpoint = (
      await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: receiver.url, events: ['*'] })
    ).json();
    await emit(6);
    await eventually(async () => {
      const view = (await t!.call('GET', `/v1/webhooks/${endpoint.id}`, t!.keys.tenant)).json();
      return view.status === 'disabled';
    });
    // Messages emitted after it was disabled are not fanned out to it; the ones before wait in its
    // stopped queue. Counted once every fan-out has committed: on PostgreSQL a fan-out that read the
    // endpoint as active just before it was disabled still adds its delivery (as endpoints were at
    // fan-out time), after the disable. So the messages are read first: each statement sees what had
    // committed when it started, and counts read before a fan-out's commit would miss its deliveries.
    const waiting = await eventually(async () => {
      if ((await countAwaitingFanout(t!.service.ctx.db)) !== 0) return undefined;
      const counts = await statusCounts(endpoint.id);
      const queue = await queueOf(t!, endpoint.id);
      return queue?.active === 0 && !counts.delivering && counts.pending ? counts.pending : undefined;
    });
    gone = false;
    expect(
      (await t.call('PATCH', `/v1/webhooks/${endpoint.id}`, t.keys.tenant, { status: 'active' })).statusCode,
    ).toBe(200);
    await eventually(async () => (await statusCounts(endpoint.id)).succeeded === waiting);
  }, 60_000);
});
