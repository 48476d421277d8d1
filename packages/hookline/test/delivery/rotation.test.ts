// rotate-secret (docs/contract.md §4.1): later attempts are signed with the new secret; during a grace period
// they carry both signatures; a rotation ends any earlier grace, so never more than two.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, emit, verifies, verifyRequest } from './support.js';

describe.each(STORE_KINDS)('secret rotation on %s', (kind) => {
  let t: TestService;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    t = await startTestService(kind, { worker: true });
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await t.close();
  });

  const rotate = async (id: string, body: { grace_period_seconds?: number } = {}) => {
    const res = await t.call('POST', `/v1/webhooks/${id}/rotate-secret`, t.keys.tenant, body);
    expect(res.statusCode, res.body).toBe(200);
    const answer = res.json<{ id: string; signing_secret: string }>();
    expect(answer.id).toBe(id);
    expect(answer.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    return answer.signing_secret;
  };
  // The spec shows rotate-secret with no body at all. (Regression: the route once answered 400
  // "body must be object" to a body-less POST.)
  it('rotate-secret without any body answers 200', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const endpoint = await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const res = await t.inject({
      method: 'POST',
      url: `/v1/webhooks/${endpoint.id}/rotate-secret`,
      headers: { authorization: `Bearer ${t.keys.tenant}` },
    });
    expect(res.statusCode, res.body).toBe(200);
    const fresh = res.json<{ signing_secret: string }>().signing_secret;
    expect(fresh).not.toBe(endpoint.signing_secret);
    await emit(t, 'user.updated', { userId: 'user_nobody' });
    const [req] = await r.waitFor(1);
    expect(verifies(req!, fresh)).toBe(true);
    expect(verifies(req!, endpoint.signing_secret)).toBe(false);
  });

  const signatures = (r: Receiver, i: number) => String(r.requests[i]!.headers['hook-signature']).split(' ');

  it('the retry after a rotation verifies with the new secret and not the old', async () => {
    // Attempt 1 is held open while the secret rotates, then fails; attempt 2 is signed afresh.
    const r = await startReceiver((_req, i) => (i === 0 ? { status: 500, delayMs: 600 } : { status: 200 }));
    receivers.push(r);
    const endpoint = await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const old = endpoint.signing_secret;
    const hookId = await emit(t, 'user.banned', { userId: 'user_1' });
    await r.waitFor(1);
    const fresh = await rotate(endpoint.id);
    expect(fresh).not.toBe(old);
    await r.waitFor(2);

    const [before, after] = r.requests;
    expect(after!.headers['hook-id']).toBe(hookId);
    expect(verifies(before!, old)).toBe(true);
    expect(verifies(before!, fresh)).toBe(false);
    expect(signatures(r, 1)).toHaveLength(1);
    expect(verifyRequest(after!, fresh).id).toBe(hookId);
    expect(verifies(after!, old)).toBe(false);
  });

  it('with a grace period the signature carries new and old; a second rotation ends the first grace', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const endpoint = await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const s1 = endpoint.signing_secret;

    await emit(t, 'user.unbanned', { n: 0 });
    await r.waitFor(1);
    expect(signatures(r, 0)).toHaveLength(1);
    expect(verifies(r.requests[0]!, s1)).toBe(true);

    const s2 = await rotate(endpoint.id, { grace_period_seconds: 3600 });
    await emit(t, 'user.unbanned', { n: 1 });
    await r.waitFor(2);
    const during = r.requests[1]!;
    expect(signatures(r, 1)).toHaveLength(2);
    expect(signatures(r, 1).every((s) => s.startsWith('v1,'))).toBe(true);
    expect(verifies(during, s2)).toBe(true);
    expect(verifies(during, s1)).toBe(true);
    // New first, old second (docs/contract.md §4.1 `v1,<new> v1,<old>`).
    expect(
      verifies({ ...during, headers: { ...during.headers, 'hook-signature': signatures(r, 1)[0] } }, s2),
    ).toBe(true);
    expect(
      verifies({ ...during, headers: { ...during.headers, 'hook-signature': signatures(r, 1)[1] } }, s1),
    ).toBe(true);

    const s3 = await rotate(endpoint.id, { grace_period_seconds: 3600 });
    await emit(t, 'user.unbanned', { n: 2 });
    await r.waitFor(3);
    const second = r.requests[2]!;
    expect(signatures(r, 2)).toHaveLength(2);
    expect(verifies(second, s3)).toBe(true);
    expect(verifies(second, s2)).toBe(true);
    expect(verifies(second, s1)).toBe(false);

    // Without a grace period only the new secret signs, immediately.
    const s4 = await rotate(endpoint.id, { grace_period_seconds: 0 });
    await emit(t, 'user.unbanned', { n: 3 });
    await r.waitFor(4);
    expect(signatures(r, 3)).toHaveLength(1);
    expect(verifies(r.requests[3]!, s4)).toBe(true);
    expect(verifies(r.requests[3]!, s3)).toBe(false);
  });

  it('after the grace period only the new signature remains', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const endpoint = await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const s1 = endpoint.signing_secret;
    const s2 = await rotate(endpoint.id, { grace_period_seconds: 1 });
    await emit(t, 'user.restored', { n: 0 });
    await r.waitFor(1);
    expect(signatures(r, 0)).toHaveLength(2);
    expect(verifies(r.requests[0]!, s1)).toBe(true);
    await new Promise((res) => setTimeout(res, 1100));
    await emit(t, 'user.restored', { n: 1 });
    await r.waitFor(2);
    expect(signatures(r, 1)).toHaveLength(1);
    expect(verifies(r.requests[1]!, s2)).toBe(true);
    expect(verifies(r.requests[1]!, s1)).toBe(false);
  });
});
