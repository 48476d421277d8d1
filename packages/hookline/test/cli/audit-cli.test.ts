// The audit log of the `hookline` command: each action leaves exactly one entry with the role `cli`
// and no key, lists leave none, and an action whose entry cannot be written does not happen
// (docs/operators.md, "The audit log").
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditEntries, refuseAuditWrites } from '../admin/audit-support.js';
import { runCli } from '../helpers/process.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, testEnv, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';

describe.each(STORE_KINDS)('audit log of hookline commands on %s', (kind) => {
  let t: TestService;
  let receiver: Receiver;
  let env: Record<string, string>;
  let deadLetterIds: string[];
  const cli = async (...args: string[]) => {
    const result = await runCli(args, env);
    expect(result.code, result.stderr).toBe(0);
    return result.stdout;
  };
  const entriesOf = async (action: () => Promise<unknown>) => {
    const before = new Set((await auditEntries(t.service.ctx.db)).map((e) => e.id));
    await action();
    return (await auditEntries(t.service.ctx.db)).filter((e) => !before.has(e.id));
  };
  const byCli = { actor_key_id: null, actor_role: 'cli' };

  beforeAll(async () => {
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_MAX_RETRIES: '0' } });
    env = testEnv(t.database, { HOOKLINE_MAX_RETRIES: '0' });
    receiver = await startReceiver(() => ({ status: 503 }));
    await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: receiver.url, events: ['*'] });
    for (let i = 0; i < 3; i++) {
      await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.created',
        data: { userId: `user_${i}` },
      });
    }
    const list = async () =>
      (await t.call('GET', '/v1/admin/dead-letters', t.keys.instance_manager)).json().data as {
        id: string;
      }[];
    await eventually(async () => (await list()).length === 3);
    deadLetterIds = (await list()).map((d) => d.id);
    receiver.respond(() => ({ status: 200 }));
  }, 60_000);
  afterAll(async () => {
    await t.close();
    await receiver.close();
  });

  it('an action whose entry cannot be written does not happen', async () => {
    const keysBefore = JSON.parse(await cli('keys', 'list', '--json')).data as { id: string }[];
    const [first] = deadLetterIds;
    const refusal = await refuseAuditWrites(t.service.ctx.db);
    try {
      const create = await runCli(['keys', 'create', '--role', 'producer', '--label', 'ghost'], env);
      expect(create.code).not.toBe(0);
      expect(create.stdout).toBe('');
      const show = await runCli(['dead-letters', 'show', first ?? ''], env);
      expect(show.code).not.toBe(0);
      expect(show.stdout).toBe('');
      const revoke = await runCli(['keys', 'revoke', keysBefore[0]?.id ?? ''], env);
      expect(revoke.code).not.toBe(0);
    } finally {
      await refusal.restore();
    }
    const keysAfter = JSON.parse(await cli('keys', 'list', '--json')).data as {
      id: string;
      revoked_at: string | null;
    }[];
    expect(keysAfter.map((k) => k.id)).toEqual(keysBefore.map((k) => k.id));
    expect(keysAfter.every((k) => k.revoked_at === null)).toBe(true);
  });

  it('records each action once with the role cli', async () => {
    const [first, second] = deadLetterIds;
    let keyId = '';
    const created = await entriesOf(async () => {
      await cli('keys', 'create', '--role', 'tenant', '--tenant', 'initech', '--label', 'audited');
      const keys = JSON.parse(await cli('keys', 'list', '--json')).data as { id: string; label: string }[];
      keyId = keys.find((k) => k.label === 'audited')?.id ?? '';
    });
    expect(created).toEqual([expect.objectContaining({ ...byCli, action: 'api_key.create', target: keyId })]);
    expect(JSON.parse(created[0]?.details ?? '')).toEqual({ role: 'tenant', tenant_id: 'initech' });
    expect(await entriesOf(() => cli('keys', 'revoke', keyId))).toEqual([
      expect.objectContaining({ ...byCli, action: 'api_key.revoke', target: keyId }),
    ]);
    // Again: a clear no-op, exit 0, saying so, and recording nothing.
    const again = await entriesOf(async () => {
      const result = await runCli(['keys', 'revoke', keyId], env);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toMatch(
        new RegExp(`^already revoked ${keyId} \\(at \\d{4}-.*; nothing changed\\n$`),
      );
    });
    expect(again).toEqual([]);
    expect(await entriesOf(() => cli('dead-letters', 'show', first ?? ''))).toEqual([
      expect.objectContaining({ ...byCli, action: 'dead_letter.inspect', target: first }),
    ]);
    expect(await entriesOf(() => cli('dead-letters', 'show', first ?? '', '--json'))).toHaveLength(1);
    expect(await entriesOf(() => cli('dead-letters', 'replay', second ?? ''))).toEqual([
      expect.objectContaining({ ...byCli, action: 'dead_letter.replay', target: second }),
    ]);
    const bulk = await entriesOf(() => cli('dead-letters', 'replay', '--all', '--tenant', 'acme'));
    expect(bulk).toEqual([
      expect.objectContaining({
        ...byCli,
        action: 'dead_letter.bulk_replay',
        target: expect.stringMatching(/^rpl_/),
      }),
    ]);
    // The filter in the API's snake_case, whoever started the job.
    expect(JSON.parse(bulk[0]?.details ?? '').filter).toEqual({
      tenant_id: 'acme',
      endpoint_id: null,
      since: null,
      until: null,
    });
  });

  it('records nothing for lists', async () => {
    expect(
      await entriesOf(async () => {
        await cli('keys', 'list');
        await cli('keys', 'list', '--json');
        await cli('dead-letters', 'list');
        await cli('dead-letters', 'list', '--json');
      }),
    ).toEqual([]);
  });
});
