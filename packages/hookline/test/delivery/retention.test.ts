import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneOnce } from '../../src/delivery/retention.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';

describe.each(STORE_KINDS)('retention on %s', (kind) => {
  let t: TestService;
  let ok: Receiver;
  let failing: Receiver;
  let now = Date.now();
  beforeAll(async () => {
    t = await startTestService(kind, {
      worker: true,
      env: { HOOKLINE_MAX_RETRIES: '0', HOOKLINE_RETENTION_DAYS: '7' },
    });
    ok = await startReceiver();
    failing = await startReceiver(() => ({ status: 500 }));
    await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: ok.url, events: ['user.*'] });
    await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: failing.url, events: ['organization.*'] });
  });
  afterAll(async () => {
    await t.close();
    await ok.close();
    await failing.close();
  });

  it('deletes finished deliveries and their messages after the retention period, keeping dead letters replayable', async () => {
    await t.call('POST', '/v1/events', t.keys.producer, {
      tenant_id: 'acme',
      type: 'user.updated',
      data: {},
    });
    await t.call('POST', '/v1/events', t.keys.producer, {
      tenant_id: 'acme',
      type: 'organization.updated',
      data: {},
    });
    const count = async (table: string) =>
      Number((await t.service.ctx.db.one<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))?.n);
    await eventually(async () => (await count('dead_letters')) === 1 && ok.requests.length === 1);
    await eventually(async () => {
      const open = await t.service.ctx.db.one<{ n: number }>(
        `SELECT COUNT(*) AS n FROM deliveries WHERE status NOT IN ('succeeded', 'dead')`,
      );
      return Number(open?.n) === 0;
    });

    // Within the retention period nothing goes.
    expect(await pruneOnce(t.service.ctx)).toMatchObject({ deliveries: 0, messages: 0 });

    const realClock = t.service.ctx.clock;
    now = Date.now() + 8 * 86_400_000;
    (t.service.ctx as { clock: () => number }).clock = () => now;
    try {
      const result = await pruneOnce(t.service.ctx);
      expect(result.deliveries).toBe(2);
      // The delivered message goes; the dead one stays because its dead letter may be replayed.
      expect(result.messages).toBe(1);
      expect(await count('deliveries')).toBe(0);
      expect(await count('messages')).toBe(1);
      expect(await count('dead_letters')).toBe(1);
    } finally {
      (t.service.ctx as { clock: () => number }).clock = realClock;
    }
    const [dl] = (await t.call('GET', '/v1/admin/dead-letters', t.keys.instance_manager)).json().data;
    failing.respond(() => ({ status: 200 }));
    expect(
      (await t.call('POST', `/v1/admin/dead-letters/${dl.id}/replay`, t.keys.instance_manager)).statusCode,
    ).toBe(202);
    await failing.waitFor(2);
  });

  it('deletes finished bulk-replay jobs after the retention period, never a running one', async () => {
    const started = await t.call('POST', '/v1/admin/dead-letters/replay', t.keys.instance_manager, {});
    expect(started.statusCode).toBe(202);
    const { id } = started.json();
    const job = async () => t.call('GET', `/v1/admin/replays/${id}`, t.keys.instance_manager);
    await eventually(async () => (await job()).json().status !== 'running');
    const count = async () =>
      Number((await t.service.ctx.db.one<{ n: number }>('SELECT COUNT(*) AS n FROM replay_jobs'))?.n);
    // A job still running is kept however old (this one leased by a worker elsewhere, so this
    // service's workers leave it alone), as is a finished one within the period.
    await t.service.ctx.db.run(
      `INSERT INTO replay_jobs (id, status, count, lease_owner, lease_expires_at, created_at, updated_at)
       VALUES ('rpl_running', 'running', 0, 'elsewhere', $1, 0, 0)`,
      [Number.MAX_SAFE_INTEGER],
    );
    expect(await pruneOnce(t.service.ctx)).toMatchObject({ replayJobs: 0 });
    const realClock = t.service.ctx.clock;
    now = Date.now() + 8 * 86_400_000;
    (t.service.ctx as { clock: () => number }).clock = () => now;
    try {
      expect(await pruneOnce(t.service.ctx)).toMatchObject({ replayJobs: 1 });
    } finally {
      (t.service.ctx as { clock: () => number }).clock = realClock;
    }
    expect((await job()).statusCode).toBe(404);
    expect(await count()).toBe(1);
    await t.service.ctx.db.run(`DELETE FROM replay_jobs WHERE id = 'rpl_running'`);
  });
});
