// `hookline dead-letters` against a database a running service shares (a second process on it).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/process.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, testEnv, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';

describe.each(STORE_KINDS)('hookline dead-letters on %s', (kind) => {
  let t: TestService;
  let receiver: Receiver;
  let env: Record<string, string>;
  beforeAll(async () => {
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_MAX_RETRIES: '0' } });
    env = testEnv(t.database, { HOOKLINE_MAX_RETRIES: '0' });
    receiver = await startReceiver(() => ({ status: 503, body: 'maintenance' }));
    await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: receiver.url, events: ['*'] });
    for (let i = 0; i < 3; i++) {
      await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.created',
        data: { userId: `user_${i}` },
      });
    }
    await eventually(
      async () =>
        (await t.call('GET', '/v1/admin/dead-letters', t.keys.instance_manager)).json().data.length === 3,
    );
  }, 60_000);
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  it('lists, shows and replays', async () => {
    const list = await runCli(['dead-letters', 'list', '--json'], env);
    expect(list.code).toBe(0);
    const page = JSON.parse(list.stdout) as { data: { id: string; hook_id: string; last_error: string }[] };
    expect(page.data).toHaveLength(3);
    expect(page.data[0]?.last_error).toContain('HTTP 503');

    const table = await runCli(['dead-letters', 'list'], env);
    expect(table.stdout.split('\n')[0]).toMatch(/^id\s+tenant_id\s+endpoint_id\s+event_type/);

    const id = page.data[0]?.id ?? '';
    const shown = JSON.parse((await runCli(['dead-letters', 'show', id, '--json'], env)).stdout) as {
      body: string;
      headers: Record<string, string>;
    };
    expect(JSON.parse(shown.body)).toMatchObject({
      type: 'user.created',
      data: { userId: expect.stringMatching(/^user_/) },
    });
    expect(shown.headers['hook-id']).toBe(page.data[0]?.hook_id);

    receiver.respond(() => ({ status: 200 }));
    const one = await runCli(['dead-letters', 'replay', id], env);
    expect(one.code).toBe(0);
    expect(one.stdout).toMatch(/^queued replay of dl_/);
    // A bulk replay is a job the service's worker runs; the command follows it until it is done.
    const bulk = await runCli(['dead-letters', 'replay', '--all', '--tenant', 'acme', '--json'], env);
    expect(bulk.code, bulk.stderr).toBe(0);
    // The record replayed just above is under way or delivered: bulk replay leaves it alone.
    expect(JSON.parse(bulk.stdout)).toMatchObject({
      status: 'done',
      count: 3,
      replayed: 2,
      skipped: 1,
      failed: 0,
    });
    expect(bulk.stderr).toBe('');
    // For people: a progress bar on stderr, the outcome on stdout.
    const again = await runCli(['dead-letters', 'replay', '--all', '--tenant', 'acme'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/^replay job rpl_\w+ over 3 dead letters/);
    expect(again.stderr).toMatch(/\[#{30}\] 100% {2}3\/3: 0 replayed, 3 skipped, 0 failed/);
    expect(again.stdout).toBe('done: 100%  3/3: 0 replayed, 3 skipped, 0 failed\n');

    const hookIds = new Set(page.data.map((d) => d.hook_id));
    await eventually(() => new Set(receiver.requests.slice(3).map((r) => r.headers['hook-id'])).size === 3);
    expect(new Set(receiver.requests.slice(3).map((r) => String(r.headers['hook-id'])))).toEqual(hookIds);
  }, 60_000);

  it.each([
    [['dead-letters', 'show', 'dl_nope'], /not found/],
    [['dead-letters', 'replay'], /give a dead-letter id/],
    [['dead-letters', 'replay', 'dl_x', '--all'], /not both/],
    [['dead-letters', 'list', '--limit', '500'], /--limit/],
    [['dead-letters', 'replay', '--all', '--since', 'yesterday'], /--since/],
  ])('%j fails with a clear message', async (args, message) => {
    const result = await runCli([...args], env);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
  });
});
