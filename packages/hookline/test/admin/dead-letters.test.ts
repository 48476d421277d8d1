// The operator surface for dead letters: list (no payload), inspect (decrypted), replay one and many
// (bulk replay in depth: replay-jobs.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '@hookline/consumer';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';

interface DeadLetterJson {
  id: string;
  tenant_id: string;
  endpoint_id: string;
  event_type: string;
  hook_id: string;
  attempts: number;
  last_error: string | null;
  died_at: string;
  replayed_at: string | null;
  replay_status: string | null;
  body?: string;
  headers?: Record<string, string>;
}

describe.each(STORE_KINDS)('dead letters on %s', (kind) => {
  let t: TestService;
  let receiver: Receiver;
  let failing = true;
  let endpoint: { id: string; signing_secret: string };
  let other: { id: string };
  const emitted: string[] = [];

  const admin = (method: string, url: string, body?: unknown) =>
    t.call(method, url, t.keys.instance_manager, body);
  const deadLetters = async (query = '') =>
    (await admin('GET', `/v1/admin/dead-letters${query}`)).json() as {
      data: DeadLetterJson[];
      next_cursor: string | null;
    };

  const jobDone = (id: string) =>
    eventually(async () => {
      const job = (await admin('GET', `/v1/admin/replays/${id}`)).json() as { status: string };
      return job.status === 'done' && job;
    });

  beforeAll(async () => {
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_MAX_RETRIES: '1' } });
    receiver = await startReceiver(() => ({
      status: failing ? 500 : 200,
      body: failing ? 'database down' : 'ok',
    }));
    endpoint = (
      await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: receiver.url, events: ['user.*'] })
    ).json();
    const globexKey = await t.keyFor('tenant', 'globex');
    other = (
      await t.call('POST', '/v1/webhooks', globexKey, { url: `${receiver.url}?globex`, events: ['*'] })
    ).json();
    for (let i = 0; i < 3; i++) {
      const res = await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.updated',
        data: { userId: `user_${i}`, email: `person${i}@example.com` },
      });
      emitted.push(res.json().id);
    }
    await t.call('POST', '/v1/events', t.keys.producer, {
      tenant_id: 'globex',
      type: 'organization.created',
      data: {},
    });
    await eventually(async () => (await deadLetters()).data.length === 4);
  }, 60_000);
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  it('lists metadata only, newest first, with filters and pagination', async () => {
    const all = await deadLetters();
    expect(all.data).toHaveLength(4);
    for (const dl of all.data) {
      expect(Object.keys(dl).sort()).toEqual(
        [
          'attempts',
          'died_at',
          'endpoint_id',
          'event_type',
          'hook_id',
          'id',
          'last_error',
          'ordering_key',
          'replay_status',
          'replayed_at',
          'tenant_id',
        ].sort(),
      );
      expect(dl.attempts).toBe(2);
      expect(dl.last_error).toContain('HTTP 500');
      expect(dl.last_error).toContain('database down');
    }
    expect(JSON.stringify(all)).not.toContain('person0@example.com');
    const ids = all.data.map((d) => d.id);
    expect([...ids].sort().reverse()).toEqual(ids);

    const acme = await deadLetters('?tenant_id=acme');
    expect(acme.data.map((d) => d.hook_id).sort()).toEqual([...emitted].sort());
    expect((await deadLetters(`?endpoint_id=${other.id}`)).data).toHaveLength(1);

    const first = await deadLetters('?limit=3');
    expect(first.data).toHaveLength(3);
    const second = await deadLetters(`?limit=3&cursor=${first.next_cursor}`);
    expect(second.data).toHaveLength(1);
    expect(second.next_cursor).toBeNull();
    expect(new Set([...first.data, ...second.data].map((d) => d.id)).size).toBe(4);
  });

  it('inspects one with its decrypted original message, as first sent', async () => {
    const [dl] = (await deadLetters(`?endpoint_id=${endpoint.id}&limit=1`)).data;
    const res = await admin('GET', `/v1/admin/dead-letters/${dl?.id}`);
    expect(res.statusCode).toBe(200);
    const full = res.json() as DeadLetterJson;
    expect(JSON.parse(full.body ?? '')).toMatchObject({
      type: 'user.updated',
      data: { email: expect.stringContaining('@') },
    });
    expect(full.headers?.['hook-id']).toBe(dl?.hook_id);
    // The signature as first sent verifies against the body as first sent.
    const event = verifyWebhook({
      secret: endpoint.signing_secret,
      headers: full.headers ?? {},
      body: full.body ?? '',
      toleranceSeconds: 3600,
    });
    expect(event.id).toBe(dl?.hook_id);
    // And the first attempt's request really carried those headers.
    const firstSent = receiver.requests.find((r) => r.headers['hook-id'] === dl?.hook_id);
    expect(firstSent?.headers['hook-signature']).toBe(full.headers?.['hook-signature']);
    expect(firstSent?.body).toBe(full.body);
  });

  it('answers 404 for unknown or malformed ids, 403 for other roles, 401 without a key', async () => {
    expect((await admin('GET', '/v1/admin/dead-letters/dl_01ARZ3NDEKTSV4RRFFQ69G5FAV')).statusCode).toBe(404);
    expect((await admin('GET', '/v1/admin/dead-letters/../../etc')).statusCode).toBe(404);
    expect((await admin('POST', '/v1/admin/dead-letters/nope/replay')).statusCode).toBe(404);
    for (const key of [t.keys.tenant, t.keys.producer]) {
      for (const [method, url] of [
        ['GET', '/v1/admin/dead-letters'],
        ['GET', '/v1/admin/dead-letters/dl_x'],
        ['POST', '/v1/admin/dead-letters/dl_x/replay'],
        ['POST', '/v1/admin/dead-letters/replay'],
        ['GET', '/v1/admin/replays/rpl_x'],
        ['GET', '/v1/admin/api-keys'],
        ['POST', '/v1/admin/api-keys'],
        ['DELETE', '/v1/admin/api-keys/key_x'],
        ['GET', '/v1/admin/tenants'],
        ['POST', '/v1/admin/tenants'],
        ['GET', '/v1/admin/tenants/acme/endpoints'],
        ['GET', '/v1/admin/stats'],
        ['GET', '/v1/admin/audit-log'],
      ] as const) {
        const res = await t.call(method, url, key);
        expect(res.statusCode, `${method} ${url}`).toBe(403);
        expect(res.json().error.code).toBe('forbidden');
      }
    }
    expect((await t.call('GET', '/v1/admin/dead-letters', null)).statusCode).toBe(401);
  });

  it('replays one: same hook-id, same body, current secret; the outcome shows on the record', async () => {
    failing = false;
    const [dl] = (await deadLetters(`?endpoint_id=${endpoint.id}&limit=1`)).data;
    if (!dl) throw new Error('no dead letter');
    const rotation = await t.call('POST', `/v1/webhooks/${endpoint.id}/rotate-secret`, t.keys.tenant);
    expect(rotation.statusCode, rotation.body).toBe(200);
    const rotated = rotation.json() as { signing_secret: string };
    const before = receiver.requests.length;
    const res = await admin('POST', `/v1/admin/dead-letters/${dl.id}/replay`);
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({ id: dl.id, status: 'queued' });

    const requests = await receiver.waitFor(before + 1);
    const replayed = requests.slice(before).find((r) => r.headers['hook-id'] === dl.hook_id);
    const original = (await admin('GET', `/v1/admin/dead-letters/${dl.id}`)).json() as DeadLetterJson;
    expect(replayed?.body).toBe(original.body);
    expect(() =>
      verifyWebhook({
        secret: rotated.signing_secret,
        headers: replayed?.headers ?? {},
        body: replayed?.body ?? '',
      }),
    ).not.toThrow();
    expect(() =>
      verifyWebhook({
        secret: endpoint.signing_secret,
        headers: replayed?.headers ?? {},
        body: replayed?.body ?? '',
      }),
    ).toThrow();

    const after = await eventually(async () => {
      const view = (await admin('GET', `/v1/admin/dead-letters/${dl.id}`)).json() as DeadLetterJson;
      return view.replay_status === 'succeeded' ? view : undefined;
    });
    expect(after.replayed_at).not.toBeNull();
  });

  it('bulk replay is a job; run twice, the second skips what the first queued', async () => {
    failing = false;
    receiver.respond(() => ({ hang: true }));
    const first = await admin('POST', '/v1/admin/dead-letters/replay', { tenant_id: 'acme' });
    expect(first.statusCode).toBe(202);
    expect(first.json().count).toBe(3);
    // One acme record was replayed and delivered above: skipped; the other two are queued.
    expect(await jobDone(first.json().id)).toMatchObject({ count: 3, replayed: 2, skipped: 1, failed: 0 });
    const second = await admin('POST', '/v1/admin/dead-letters/replay', { tenant_id: 'acme' });
    expect(await jobDone(second.json().id)).toMatchObject({ count: 3, replayed: 0, skipped: 3, failed: 0 });
    receiver.respond(() => ({ status: 200 }));
  });

  it('refuses to replay to a deleted endpoint', async () => {
    const [dl] = (await deadLetters(`?endpoint_id=${other.id}`)).data;
    const globexKey = await t.keyFor('tenant', 'globex');
    await t.call('DELETE', `/v1/webhooks/${other.id}`, globexKey);
    const res = await admin('POST', `/v1/admin/dead-letters/${dl?.id}/replay`);
    expect(res.statusCode).toBe(409);
    expect(res.json().error.code).toBe('endpoint_deleted');
    const bulk = await admin('POST', '/v1/admin/dead-letters/replay', { endpoint_id: other.id });
    expect(bulk.json().count).toBe(1);
    expect(await jobDone(bulk.json().id)).toMatchObject({ count: 1, replayed: 0, skipped: 0, failed: 1 });
  });

  it('records every admin action in the audit log', async () => {
    const log = (await admin('GET', '/v1/admin/audit-log?limit=100')).json() as {
      data: { action: string; actor_role: string; actor_key_id: string | null; target: string | null }[];
    };
    const actions = log.data.map((e) => e.action);
    expect(actions).toEqual(
      expect.arrayContaining(['dead_letter.inspect', 'dead_letter.replay', 'dead_letter.bulk_replay']),
    );
    // The fixture's own keys were made as the command line would (role cli); the rest were made here.
    const here = log.data.filter((e) => e.action.startsWith('dead_letter.'));
    expect(here.every((e) => e.actor_role === 'instance_manager' && e.actor_key_id?.startsWith('key_'))).toBe(
      true,
    );
  });
});
