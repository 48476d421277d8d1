// Wake-ups between processes on PostgreSQL (store/work-signal.ts): an emit to `hookline serve`,
// whose API and delivery thread share one process, sends one notification. Before, the delivery
// thread re-sent each wake-up it got from the API thread, and the API thread's LISTEN passed that
// one back to the thread: one emit started ~150 notifications a second for as long as the process
// ran, each waking the thread's claims, fan-out and replay runner.
import { afterEach, describe, expect, it } from 'vitest';
import { createApiKeys, postJson, startProcess } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';
import { testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase, listenForWakeUps } from '../helpers/stores.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.runIf(STORE_KINDS.includes('postgres'))('wake-ups on PostgreSQL', () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn().catch(() => {});
  });

  it('an emit to serve notifies the other processes once, and nothing echoes back and forth', async () => {
    const database = await createTestDatabase('postgres');
    cleanup.push(() => database.drop());
    const env = testEnv(database);
    const { tenantKey, producerKey } = await createApiKeys(env);
    const receiver = await startReceiver(() => ({ status: 204 }));
    cleanup.push(() => receiver.close());
    const serve = await startProcess(['serve'], env);
    cleanup.push(() => serve.kill());
    const created = await postJson(serve.address, '/v1/webhooks', tenantKey, {
      url: receiver.url,
      events: ['*'],
    });
    expect(created.status).toBe(201);

    const listener = await listenForWakeUps(database);
    cleanup.push(() => listener.close());
    const heard = listener.payloads;

    const emitted = await postJson(serve.address, '/v1/events', producerKey, {
      tenant_id: 'acme',
      type: 'user.created',
      data: { userId: 'user_1' },
    });
    expect(emitted.status).toBe(202);
    await receiver.waitFor(1, 10_000);
    // Long enough for hundreds of round trips of an echo.
    await sleep(1500);
    // The emit's own notification; at most a fan-out's or a retry's besides.
    expect(heard.length).toBeGreaterThanOrEqual(1);
    expect(heard.length).toBeLessThanOrEqual(3);
    // Each names its sender and what is waiting.
    const kind = '(work|fanout|claim|replay)';
    for (const payload of heard) expect(payload).toMatch(new RegExp(`^[0-9a-f-]{36} ${kind}(,${kind})*$`));
    // The emit's asks for a fan-out only, the fan-out's for a claim only (store/work-signal.ts).
    expect(heard[0]).toMatch(/ fanout$/);
    if (heard.length > 1) expect(heard[1]).toMatch(/ claim$/);
  }, 60_000);
});
