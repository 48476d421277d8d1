import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';

describe.each(STORE_KINDS)('admin keys, tenants and stats on %s', (kind) => {
  let t: TestService;
  const admin = (method: string, url: string, body?: unknown) =>
    t.call(method, url, t.keys.instance_manager, body);
  beforeAll(async () => {
    t = await startTestService(kind);
  });
  afterAll(async () => t.close());

  it('creates a key once, lists without secrets, revokes at once', async () => {
    const created = await admin('POST', '/v1/admin/api-keys', {
      role: 'tenant',
      tenant_id: 'initech',
      label: 'ops',
    });
    expect(created.statusCode).toBe(201);
    const { key, id } = created.json() as { key: string; id: string };
    expect(key).toMatch(/^hk_t_/);
    expect((await t.call('GET', '/v1/webhooks', key)).statusCode).toBe(200);

    const list = await admin('GET', '/v1/admin/api-keys?limit=100');
    expect(list.body).not.toContain(key);
    expect(list.json().data.find((k: { id: string }) => k.id === id)).toMatchObject({
      role: 'tenant',
      tenant_id: 'initech',
      label: 'ops',
      revoked_at: null,
    });

    const revoked = await admin('DELETE', `/v1/admin/api-keys/${id}`);
    expect(revoked.statusCode).toBe(200);
    expect(revoked.json().revoked_at).not.toBeNull();
    expect((await t.call('GET', '/v1/webhooks', key)).statusCode).toBe(401);
    expect((await admin('DELETE', '/v1/admin/api-keys/key_nope')).statusCode).toBe(404);
  });

  it.each([
    [{ role: 'tenant' }, 'validation_failed'],
    [{ role: 'producer', tenant_id: 'acme' }, 'validation_failed'],
    [{ role: 'root' }, 'validation_failed'],
    [{ role: 'tenant', tenant_id: 'no spaces' }, 'validation_failed'],
  ])('refuses key %o', async (body, code) => {
    const res = await admin('POST', '/v1/admin/api-keys', body);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(code);
  });

  it('lists tenants with endpoint counts', async () => {
    await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: 'http://127.0.0.1:9/a', events: ['*'] });
    const second = (
      await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: 'http://127.0.0.1:9/b', events: ['*'] })
    ).json();
    await t.call('DELETE', `/v1/webhooks/${second.id}`, t.keys.tenant);
    expect((await admin('POST', '/v1/admin/tenants', { id: 'umbrella' })).statusCode).toBe(201);
    const tenants = (await admin('GET', '/v1/admin/tenants')).json().data as {
      id: string;
      endpoints: Record<string, number>;
    }[];
    expect(tenants.find((x) => x.id === 'acme')?.endpoints).toEqual({
      active: 1,
      paused: 0,
      disabled: 0,
      deleted: 1,
    });
    expect(tenants.find((x) => x.id === 'umbrella')?.endpoints).toEqual({
      active: 0,
      paused: 0,
      disabled: 0,
      deleted: 0,
    });

    const endpoints = (await admin('GET', '/v1/admin/tenants/acme/endpoints')).json().data as {
      status: string;
      backlog: number;
      health: { success_rate: number | null };
    }[];
    expect(endpoints.map((e) => e.status).sort()).toEqual(['active', 'deleted']);
    expect(endpoints[0]?.health.success_rate).toBeNull();
    expect((await admin('GET', '/v1/admin/tenants/bad%20id/endpoints')).statusCode).toBe(400);
  });

  it('reports stats with the current queue depth', async () => {
    const res = await admin('GET', '/v1/admin/stats?minutes=30');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      bucket_seconds: 60,
      throughput: [],
      current: { due: 0, scheduled: 0, delivering: 0, dead_letters: 0 },
    });
    expect((await admin('GET', '/v1/admin/stats?minutes=0')).statusCode).toBe(400);
  });
});
