// The audit log over HTTP: every admin action leaves exactly one entry naming the acting key and its
// role, looks and lists aside; and an entry is part of its action's transaction, so when the entry
// cannot be written the action does not happen either (docs/operators.md, "The audit log").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audit, CLI_ACTOR } from '../../src/engine/audit.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { auditEntries, refuseAuditWrites } from './audit-support.js';

describe.each(STORE_KINDS)('audit log of HTTP admin actions on %s', (kind) => {
  let t: TestService;
  let receiver: Receiver;
  let managerKeyId: string;
  let deadLetterIds: string[];
  let endpointId: string;
  const admin = (method: string, url: string, body?: unknown) =>
    t.call(method, url, t.keys.instance_manager, body);
  /** The entries `action` adds to the log. */
  const entriesOf = async (action: () => Promise<unknown>) => {
    const before = new Set((await auditEntries(t.service.ctx.db)).map((e) => e.id));
    await action();
    return (await auditEntries(t.service.ctx.db)).filter((e) => !before.has(e.id));
  };
  const deadLetter = async (id: string) =>
    (await admin('GET', `/v1/admin/dead-letters?limit=100`))
      .json()
      .data.find((d: { id: string }) => d.id === id) as { replayed_at: string | null };

  beforeAll(async () => {
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_MAX_RETRIES: '0' } });
    receiver = await startReceiver(() => ({ status: 503 }));
    endpointId = (
      await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: receiver.url, events: ['*'] })
    ).json().id;
    for (let i = 0; i < 4; i++) {
      await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.created',
        data: { userId: `user_${i}` },
      });
    }
    await eventually(async () => (await admin('GET', '/v1/admin/dead-letters')).json().data.length === 4);
    deadLetterIds = (await admin('GET', '/v1/admin/dead-letters'))
      .json()
      .data.map((d: { id: string }) => d.id);
    const keys = (await admin('GET', '/v1/admin/api-keys?limit=100')).json().data as {
      id: string;
      prefix: string;
    }[];
    managerKeyId = keys.find((k) => k.prefix === t.keys.instance_manager.slice(0, 10))?.id ?? '';
    expect(managerKeyId).toMatch(/^key_/);
  }, 60_000);
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  it('an action whose entry cannot be written does not happen', async () => {
    const victimKey = await t.keyFor('producer');
    const keysBefore = (await admin('GET', '/v1/admin/api-keys?limit=100')).json().data as {
      id: string;
      prefix: string;
      revoked_at: string | null;
    }[];
    const victimId = keysBefore.find((k) => k.prefix === victimKey.slice(0, 10))?.id ?? '';
    const untouched = deadLetterIds[0] ?? '';
    const tenantsBefore = (await admin('GET', '/v1/admin/tenants?limit=100')).json().data;
    const refusal = await refuseAuditWrites(t.service.ctx.db);
    try {
      // Each answers an error: the action failed with its entry.
      expect(
        (await admin('POST', '/v1/admin/api-keys', { role: 'producer', label: 'ghost' })).statusCode,
      ).toBe(500);
      expect((await admin('DELETE', `/v1/admin/api-keys/${victimId}`)).statusCode).toBe(500);
      expect((await admin('POST', '/v1/admin/tenants', { id: 'ghost' })).statusCode).toBe(500);
      expect((await admin('POST', `/v1/admin/dead-letters/${untouched}/replay`)).statusCode).toBe(500);
      expect(
        (await admin('POST', '/v1/admin/dead-letters/replay', { endpoint_id: endpointId })).statusCode,
      ).toBe(500);
      // A look that cannot be recorded shows nothing.
      const look = await admin('GET', `/v1/admin/dead-letters/${untouched}`);
      expect(look.statusCode).toBe(500);
      expect(look.body).not.toContain('user_');
    } finally {
      await refusal.restore();
    }
    // None of them happened.
    const keysAfter = (await admin('GET', '/v1/admin/api-keys?limit=100')).json().data as typeof keysBefore;
    expect(keysAfter.map((k) => k.id)).toEqual(keysBefore.map((k) => k.id));
    expect(keysAfter.find((k) => k.id === victimId)?.revoked_at).toBeNull();
    expect((await admin('GET', '/v1/admin/tenants?limit=100')).json().data).toEqual(tenantsBefore);
    expect((await deadLetter(untouched)).replayed_at).toBeNull();
    // And with the log writable again, they do.
    receiver.respond(() => ({ status: 200 }));
    expect((await admin('POST', `/v1/admin/dead-letters/${untouched}/replay`)).statusCode).toBe(202);
    expect((await admin('DELETE', `/v1/admin/api-keys/${victimId}`)).statusCode).toBe(200);
  });
  it('records each action once, with the acting key and its role', async () => {
    // The first record was replayed above; the receiver now accepts replays, so a replay is either
    // under way or delivered: bulk replay leaves both alone.
    const [, second, third] = deadLetterIds;
    const byManager = { actor_key_id: managerKeyId, actor_role: 'instance_manager' };

    expect(await entriesOf(() => admin('GET', `/v1/admin/dead-letters/${third}`))).toEqual([
      expect.objectContaining({ ...byManager, action: 'dead_letter.inspect', target: third }),
    ]);
    expect(await entriesOf(() => admin('POST', `/v1/admin/dead-letters/${second}/replay`))).toEqual([
      expect.objectContaining({ ...byManager, action: 'dead_letter.replay', target: second }),
    ]);
    const bulk = await entriesOf(() =>
      admin('POST', '/v1/admin/dead-letters/replay', { tenant_id: 'acme', since: '2020-01-01T00:00:00Z' }),
    );
    expect(bulk).toEqual([
      expect.objectContaining({
        ...byManager,
        action: 'dead_letter.bulk_replay',
        target: expect.stringMatching(/^rpl_/),
      }),
    ]);
    // The entry names the job and carries the filter and how many dead letters it covers: every
    // match (the job itself skips those with a replay under way).
    // The filter as the API takes it: snake_case, times as ISO 8601, what was not given null.
    expect(JSON.parse(bulk[0]?.details ?? '')).toEqual({
      filter: { tenant_id: 'acme', endpoint_id: null, since: '2020-01-01T00:00:00.000Z', until: null },
      count: deadLetterIds.length,
    });
    // A bulk replay that matches nothing is still a request someone made.
    expect(
      await entriesOf(() => admin('POST', '/v1/admin/dead-letters/replay', { tenant_id: 'nobody' })),
    ).toEqual([
      expect.objectContaining({
        action: 'dead_letter.bulk_replay',
        details: expect.stringContaining('"count":0'),
      }),
    ]);

    let keyId = '';
    expect(
      await entriesOf(async () => {
        keyId = (await admin('POST', '/v1/admin/api-keys', { role: 'producer', label: 'audited' })).json().id;
      }),
    ).toEqual([expect.objectContaining({ ...byManager, action: 'api_key.create', target: keyId })]);
    let revokedAt = '';
    expect(
      await entriesOf(async () => {
        const res = await admin('DELETE', `/v1/admin/api-keys/${keyId}`);
        expect(res.statusCode).toBe(200);
        revokedAt = res.json().revoked_at;
      }),
    ).toEqual([expect.objectContaining({ ...byManager, action: 'api_key.revoke', target: keyId })]);
    // Revoking it again changes nothing and records nothing: the same answer, its first revocation time.
    expect(
      await entriesOf(async () => {
        const res = await admin('DELETE', `/v1/admin/api-keys/${keyId}`);
        expect(res.statusCode).toBe(200);
        expect(res.json()).toMatchObject({ id: keyId, revoked_at: revokedAt });
      }),
    ).toEqual([]);
    expect(revokedAt).toMatch(/^\d{4}-/);
    expect(await entriesOf(() => admin('POST', '/v1/admin/tenants', { id: 'umbrella' }))).toEqual([
      expect.objectContaining({ ...byManager, action: 'tenant.create', target: 'umbrella' }),
    ]);
  });

  it('writes every detail key in snake_case, as the API names its fields', async () => {
    const keysOf = (value: unknown): string[] =>
      value && typeof value === 'object' ? Object.entries(value).flatMap(([k, v]) => [k, ...keysOf(v)]) : [];
    const entries = await auditEntries(t.service.ctx.db);
    // Entries of every kind this suite made, the bulk replay's filter among them.
    expect(new Set(entries.map((e) => e.action))).toEqual(
      new Set([
        'api_key.create',
        'api_key.revoke',
        'dead_letter.bulk_replay',
        'dead_letter.inspect',
        'dead_letter.replay',
        'tenant.create',
      ]),
    );
    const keys = entries.flatMap((e) => keysOf(JSON.parse(e.details)));
    expect(keys).toContain('tenant_id');
    expect(keys.filter((k) => !/^[a-z][a-z0-9_]*$/.test(k))).toEqual([]);
  });

  it('refuses to write an entry outside a transaction, where it could outlive or miss its action', async () => {
    await expect(audit(t.service.ctx.db, CLI_ACTOR, 'test.outside', null, {}, Date.now())).rejects.toThrow(
      /inside the transaction/,
    );
    expect((await auditEntries(t.service.ctx.db)).filter((e) => e.action === 'test.outside')).toEqual([]);
  });

  it('records nothing for lists and for actions refused before they happened', async () => {
    const entries = await entriesOf(async () => {
      for (const url of [
        '/v1/admin/dead-letters',
        '/v1/admin/api-keys',
        '/v1/admin/tenants',
        '/v1/admin/audit-log',
        '/v1/admin/stats',
      ]) {
        expect((await admin('GET', url)).statusCode).toBe(200);
      }
      expect((await admin('GET', '/v1/admin/dead-letters/dl_nope')).statusCode).toBe(404);
      expect((await admin('DELETE', '/v1/admin/api-keys/key_nope')).statusCode).toBe(404);
      expect((await admin('POST', '/v1/admin/api-keys', { role: 'tenant' })).statusCode).toBe(400);
    });
    expect(entries).toEqual([]);
  });
});
