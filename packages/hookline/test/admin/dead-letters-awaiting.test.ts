// Dead letters awaiting an operator, on both stores: what the console's overview, its badge, the
// endpoint health and /metrics count (docs/operators.md, "The console"). A dead letter awaits until a
// replay of it is queued, and again when that replay dies or is cancelled; a delivered replay settles
// it for good. Every figure comes from the same counters, and the hourly recount agrees with them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneOnce } from '../../src/delivery/retention.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';

interface Figures {
  stats: { stored: number; awaiting: number };
  metrics: { stored: number; awaiting: number };
  endpoints: Record<string, number>;
}

describe.each(STORE_KINDS)('dead letters awaiting an operator on %s', (kind) => {
  let t: TestService;
  let receiver: Receiver;
  /** How the receiver answers each endpoint (by its query string). */
  const answers: Record<string, 'fail' | 'ok' | 'hang'> = { '?a': 'fail', '?b': 'fail' };
  let a: string;
  let b: string;
  const admin = (method: string, url: string, body?: unknown) =>
    t.call(method, url, t.keys.instance_manager, body);
  const deadLetters = async (endpointId: string) =>
    (await admin('GET', `/v1/admin/dead-letters?endpoint_id=${endpointId}`)).json().data as {
      id: string;
      replay_status: string | null;
    }[];
  const metric = (text: string, name: string) => {
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return Number(line?.split(' ')[1]);
  };

  /** Every place an operator reads the count, read now. */
  const figures = async (): Promise<Figures> => {
    const current = (await admin('GET', '/v1/admin/stats?minutes=60')).json().current as {
      dead_letters: number;
      dead_letters_awaiting: number;
    };
    const text = (await t.inject({ method: 'GET', url: '/metrics' })).body;
    const health = (await admin('GET', '/v1/admin/tenants/acme/endpoints')).json().data as {
      id: string;
      health: { dead_letters_awaiting: number };
    }[];
    return {
      stats: { stored: current.dead_letters, awaiting: current.dead_letters_awaiting },
      metrics: {
        stored: metric(text, 'hookline_dead_letters'),
        awaiting: metric(text, 'hookline_dead_letters_awaiting'),
      },
      endpoints: Object.fromEntries(health.map((e) => [e.id, e.health.dead_letters_awaiting])),
    };
  };
  const expectFigures = async (stored: number, onA: number, onB: number) => {
    const expected: Figures = {
      stats: { stored, awaiting: onA + onB },
      metrics: { stored, awaiting: onA + onB },
      endpoints: { [a]: onA, [b]: onB },
    };
    expect(await figures()).toEqual(expected);
    // The hourly recount, from the rows themselves, finds what the counters say.
    await pruneOnce(t.service.ctx);
    expect(await figures()).toEqual(expected);
  };

  beforeAll(async () => {
    t = await startTestService(kind, { worker: true, env: { HOOKLINE_MAX_RETRIES: '0' } });
    receiver = await startReceiver((request) => {
      const answer = answers[request.path.slice(request.path.indexOf('?'))];
      if (answer === 'hang') return { hang: true };
      return answer === 'ok' ? { status: 200 } : { status: 500, body: 'down' };
    });
    const endpoint = async (query: string) =>
      (
        await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: `${receiver.url}${query}`, events: ['*'] })
      ).json().id as string;
    a = await endpoint('?a');
    b = await endpoint('?b');
    for (let i = 0; i < 3; i++) {
      await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: 'user.created',
        data: { userId: `user_${i}` },
      });
    }
    // Each event died at both endpoints: 3 dead letters each.
    await eventually(async () => (await deadLetters(a)).length === 3 && (await deadLetters(b)).length === 3);
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  it('counts every new dead letter as awaiting', async () => {
    await expectFigures(6, 3, 3);
  });

  it('a replay that dies again awaits an operator again; one delivered does not', async () => {
    const [first, second] = await deadLetters(a);
    expect((await admin('POST', `/v1/admin/dead-letters/${first!.id}/replay`)).statusCode).toBe(202);
    await eventually(
      async () => (await deadLetters(a)).find((d) => d.id === first!.id)?.replay_status === 'dead',
    );
    await expectFigures(6, 3, 3);

    answers['?a'] = 'ok';
    expect((await admin('POST', `/v1/admin/dead-letters/${second!.id}/replay`)).statusCode).toBe(202);
    await eventually(
      async () => (await deadLetters(a)).find((d) => d.id === second!.id)?.replay_status === 'succeeded',
    );
    await expectFigures(6, 2, 3);
    // Replayed again after it was delivered: still handled, counted once.
    expect((await admin('POST', `/v1/admin/dead-letters/${second!.id}/replay`)).statusCode).toBe(202);
    await eventually(
      async () => (await deadLetters(a)).find((d) => d.id === second!.id)?.replay_status === 'succeeded',
    );
    await expectFigures(6, 2, 3);
  });

  it('a bulk replay settles what it queues', async () => {
    const job = (await admin('POST', '/v1/admin/dead-letters/replay', { endpoint_id: a })).json();
    await eventually(
      async () => (await admin('GET', `/v1/admin/replays/${job.id}`)).json().status === 'done',
    );
    await eventually(async () => (await deadLetters(a)).every((d) => d.replay_status === 'succeeded'));
    await expectFigures(6, 0, 3);
  });

  it('a replay under way is not awaiting; cancelled with its endpoint, it awaits again', async () => {
    answers['?b'] = 'hang';
    const [first] = await deadLetters(b);
    const before = receiver.requests.length;
    expect((await admin('POST', `/v1/admin/dead-letters/${first!.id}/replay`)).statusCode).toBe(202);
    await receiver.waitFor(before + 1);
    expect(await figures()).toMatchObject({ stats: { awaiting: 2 }, metrics: { awaiting: 2 } });
    expect((await t.call('DELETE', `/v1/webhooks/${b}`, t.keys.tenant)).statusCode).toBe(200);
    await eventually(
      async () => (await deadLetters(b)).find((d) => d.id === first!.id)?.replay_status === 'cancelled',
    );
    await expectFigures(6, 0, 3);
  });
});
