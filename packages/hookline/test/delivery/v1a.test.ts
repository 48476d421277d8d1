// v1a endpoints (docs/contract.md §4.1, §5): Ed25519 key pairs, the private key sealed, the public key
// on the endpoint object; deliveries verified by a verifier written here with node:crypto alone and by
// @hookline/consumer; rotation grace with two v1a signatures; switching schemes either way.
import { createPublicKey, verify as edVerify } from 'node:crypto';
import { verifyWebhook } from '@hookline/consumer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getEndpointById } from '../../src/store/endpoints.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { storedSecrets } from '../api/support.js';
import { emit, verifies } from './support.js';

const PUBLIC_KEY = /^whpk_[A-Za-z0-9+/]{43}=$/;

/**
 * A subscriber's verifier with nothing but node:crypto: the signed content is
 * `<hook-id>.<hook-timestamp>.<raw body>`, the key is whpk_ + base64 of the 32 raw Ed25519 bytes, and
 * any v1a entry of hook-signature that verifies is enough.
 */
function nodeCryptoVerifies(req: Pick<ReceivedRequest, 'headers' | 'body'>, publicKey: string): boolean {
  const raw = Buffer.from(publicKey.slice('whpk_'.length), 'base64');
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') },
    format: 'jwk',
  });
  const content = Buffer.from(`${req.headers['hook-id']}.${req.headers['hook-timestamp']}.${req.body}`);
  return String(req.headers['hook-signature'])
    .split(' ')
    .filter((entry) => entry.startsWith('v1a,'))
    .some((entry) => edVerify(null, content, key, Buffer.from(entry.slice(4), 'base64')));
}

const consumerVerifies = (req: ReceivedRequest, keys: { publicKey: string } | { secret: string }) => {
  try {
    verifyWebhook({ ...keys, headers: req.headers as Record<string, string>, body: req.body });
    return true;
  } catch {
    return false;
  }
};

describe.each(STORE_KINDS)('v1a (Ed25519) endpoints on %s', (kind) => {
  let t: TestService;
  const receivers: Receiver[] = [];
  let tenants = 0;
  beforeAll(async () => {
    t = await startTestService(kind, { worker: true });
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await t.close();
  });

  /** A tenant of its own (so no other test's endpoints get its events) with one endpoint. */
  async function setUp(scheme: 'v1' | 'v1a') {
    const tenant = `v1a-${++tenants}`;
    const key = await t.keyFor('tenant', tenant);
    const r = await startReceiver();
    receivers.push(r);
    const res = await t.call('POST', '/v1/webhooks', key, {
      url: r.url,
      events: ['user.*'],
      ...(scheme === 'v1' ? {} : { signature_scheme: scheme }),
    });
    expect(res.statusCode, res.body).toBe(201);
    const endpoint = res.json<{ id: string; public_key: string | null; signing_secret?: string }>();
    const send = (n: number) => emit(t, 'user.updated', { userId: `user_${n}` }, tenant);
    const rotate = async (body: object) => {
      const answer = await t.call('POST', `/v1/webhooks/${endpoint.id}/rotate-secret`, key, body);
      expect(answer.statusCode, answer.body).toBe(200);
      return answer.json<{ id: string; public_key?: string; signing_secret?: string }>();
    };
    return { key, r, endpoint, send, rotate };
  }

  it('create answers the public key and no secret; a delivery verifies with node:crypto and the consumer, a tampered one does not', async () => {
    const { key, r, endpoint, send } = await setUp('v1a');
    expect(endpoint).toMatchObject({ signature_scheme: 'v1a' });
    expect(endpoint.public_key).toMatch(PUBLIC_KEY);
    expect(endpoint).not.toHaveProperty('signing_secret');
    const got = await t.call('GET', `/v1/webhooks/${endpoint.id}`, key);
    expect(got.json()).toMatchObject({ signature_scheme: 'v1a', public_key: endpoint.public_key });
    expect(got.body).not.toMatch(/whsk_|whsec_/);

    // The private key is stored sealed: not in the row in clear.
    const [privateKey] = await storedSecrets(t, endpoint.id);
    expect(privateKey).toMatch(/^whsk_/);
    const row = await getEndpointById(t.service.ctx.db, endpoint.id);
    expect(Buffer.from(row!.secret).includes(Buffer.from(privateKey!.slice(5), 'base64'))).toBe(false);
    expect(Buffer.from(row!.secret).includes(privateKey!)).toBe(false);

    const hookId = await send(1);
    const [req] = await r.waitFor(1);
    expect(req!.headers['hook-id']).toBe(hookId);
    expect(String(req!.headers['hook-signature'])).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
    expect(nodeCryptoVerifies(req!, endpoint.public_key!)).toBe(true);
    expect(consumerVerifies(req!, { publicKey: endpoint.public_key! })).toBe(true);

    const tampered = { ...req!, body: req!.body.replace('user_1', 'user_2') };
    expect(tampered.body).not.toBe(req!.body);
    expect(nodeCryptoVerifies(tampered, endpoint.public_key!)).toBe(false);
    expect(consumerVerifies(tampered, { publicKey: endpoint.public_key! })).toBe(false);
    const otherKey = (await setUp('v1a')).endpoint.public_key!;
    expect(nodeCryptoVerifies(req!, otherKey)).toBe(false);
  });

  it('rotation with a grace period: two v1a signatures, old and new key; after it, only the new', async () => {
    const { r, endpoint, send, rotate } = await setUp('v1a');
    const old = endpoint.public_key!;
    const rotated = await rotate({ grace_period_seconds: 3600 });
    expect(Object.keys(rotated).sort()).toEqual(['id', 'public_key']);
    expect(rotated.public_key).toMatch(PUBLIC_KEY);
    expect(rotated.public_key).not.toBe(old);
    await send(1);
    const [req] = await r.waitFor(1);
    const entries = String(req!.headers['hook-signature']).split(' ');
    expect(entries.map((e) => e.slice(0, 4))).toEqual(['v1a,', 'v1a,']);
    for (const publicKey of [old, rotated.public_key!]) {
      expect(nodeCryptoVerifies(req!, publicKey)).toBe(true);
      expect(consumerVerifies(req!, { publicKey })).toBe(true);
    }
    // Each signature verifies with its own key only: new first, old second.
    expect(
      nodeCryptoVerifies({ ...req!, headers: { ...req!.headers, 'hook-signature': entries[0] } }, old),
    ).toBe(false);

    const ended = await rotate({});
    await send(2);
    const [, second] = await r.waitFor(2);
    expect(String(second!.headers['hook-signature']).split(' ')).toHaveLength(1);
    expect(nodeCryptoVerifies(second!, ended.public_key!)).toBe(true);
    expect(nodeCryptoVerifies(second!, rotated.public_key!)).toBe(false);
  });

  it('switching v1 → v1a with a grace carries v1a,<new> v1,<old>; and back to v1 answers a secret', async () => {
    const { key, r, endpoint, send, rotate } = await setUp('v1');
    const secret = endpoint.signing_secret!;
    expect(secret).toMatch(/^whsec_/);
    expect(endpoint.public_key).toBeNull();
    const switched = await rotate({ grace_period_seconds: 3600, signature_scheme: 'v1a' });
    expect(Object.keys(switched).sort()).toEqual(['id', 'public_key']);
    const got = await t.call('GET', `/v1/webhooks/${endpoint.id}`, key);
    expect(got.json()).toMatchObject({ signature_scheme: 'v1a', public_key: switched.public_key });
    await send(1);
    const [req] = await r.waitFor(1);
    const entries = String(req!.headers['hook-signature']).split(' ');
    expect(entries.map((e) => e.split(',')[0])).toEqual(['v1a', 'v1']);
    expect(nodeCryptoVerifies(req!, switched.public_key!)).toBe(true);
    expect(consumerVerifies(req!, { publicKey: switched.public_key! })).toBe(true);
    expect(verifies(req!, secret)).toBe(true);

    const back = await rotate({ signature_scheme: 'v1' });
    expect(Object.keys(back).sort()).toEqual(['id', 'signing_secret']);
    expect(back.signing_secret).toMatch(/^whsec_/);
    const view = await t.call('GET', `/v1/webhooks/${endpoint.id}`, key);
    expect(view.json()).toMatchObject({ signature_scheme: 'v1', public_key: null });
    await send(2);
    const [, second] = await r.waitFor(2);
    expect(String(second!.headers['hook-signature'])).toMatch(/^v1,[^ ]+$/);
    expect(verifies(second!, back.signing_secret!)).toBe(true);
    expect(consumerVerifies(second!, { secret: back.signing_secret! })).toBe(true);
  });

  it('refuses an unknown signature_scheme in one sentence naming the field', async () => {
    for (const [url, body] of [
      ['/v1/webhooks', { url: 'https://hooks.example.com/in', events: ['*'], signature_scheme: 'v2' }],
      [`/v1/webhooks/${(await setUp('v1')).endpoint.id}/rotate-secret`, { signature_scheme: 'ed25519' }],
    ] as const) {
      const res = await t.call('POST', url, t.keys.tenant, body);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error.message).toBe('signature_scheme must be one of "v1" or "v1a"');
    }
  });
});
