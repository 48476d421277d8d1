// Rotating HOOKLINE_ENCRYPTION_KEY: rows sealed with the old key still open when it is listed in
// HOOKLINE_PREVIOUS_ENCRYPTION_KEYS, and without it they do not.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { verifyWebhook } from '@hookline/consumer';
import { loadConfig } from '../../src/config.js';
import { CLI_ACTOR } from '../../src/engine/audit.js';
import { createApiKey } from '../../src/keys/api-keys.js';
import { createEndpoint } from '../../src/endpoints/endpoint-service.js';
import { startService } from '../../src/service.js';
import { eventually, startReceiver } from '../helpers/receiver.js';
import { testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase } from '../helpers/stores.js';

describe.each(STORE_KINDS)('encryption key rotation on %s', (kind) => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });

  it('delivers a message sealed with the old key once the new key runs with the old one as previous', async () => {
    const database = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const receiver = await startReceiver();
    cleanup.push(() => receiver.close());
    const oldKey = randomBytes(32).toString('base64');
    const newKey = randomBytes(32).toString('base64');
    const start = (env: Record<string, string>, worker: boolean) =>
      startService(loadConfig(testEnv(database, env)), {
        api: true,
        worker,
        processMetrics: false,
        db: database.open(),
      });

    // Before the rotation: an endpoint (its secret sealed) and a message (its payload sealed).
    const before = await start({ HOOKLINE_ENCRYPTION_KEY: oldKey }, false);
    const endpoint = await createEndpoint(before.ctx, 'acme', { url: receiver.url, events: ['*'] });
    const { id } = await before.emitter.emit({ tenantId: 'acme', type: 'user.updated', data: { n: 1 } });
    await createApiKey(before.ctx, { role: 'producer' }, CLI_ACTOR);
    await before.close();

    const after = await start(
      { HOOKLINE_ENCRYPTION_KEY: newKey, HOOKLINE_PREVIOUS_ENCRYPTION_KEYS: oldKey },
      true,
    );
    cleanup.push(() => after.close());
    const [request] = await receiver.waitFor(1);
    expect(request?.headers['hook-id']).toBe(id);
    expect(
      verifyWebhook({
        secret: endpoint.signing_secret,
        headers: request?.headers ?? {},
        body: request?.body ?? '',
      }).data,
    ).toEqual({ n: 1 });
  });

  it('fails the attempts, visibly and without sending, when the old key is missing', async () => {
    const database = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const receiver = await startReceiver();
    cleanup.push(() => receiver.close());
    const oldKey = randomBytes(32).toString('base64');
    const before = await startService(loadConfig(testEnv(database, { HOOKLINE_ENCRYPTION_KEY: oldKey })), {
      api: true,
      worker: false,
      processMetrics: false,
      db: database.open(),
    });
    await createEndpoint(before.ctx, 'acme', { url: receiver.url, events: ['*'] });
    await before.emitter.emit({ tenantId: 'acme', type: 'user.updated', data: { n: 1 } });
    await before.close();

    const env = testEnv(database, {
      HOOKLINE_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      HOOKLINE_MAX_RETRIES: '1',
    });
    const after = await startService(loadConfig(env), {
      api: true,
      worker: true,
      processMetrics: false,
      db: database.open(),
    });
    cleanup.push(() => after.close());
    const row = await eventually(async () => {
      const r = await after.ctx.db.one<{ status: string; attempts: number; last_error: string }>(
        'SELECT status, attempts, last_error FROM deliveries',
      );
      return r?.status === 'dead' ? r : undefined;
    });
    expect(row).toMatchObject({ attempts: 2, last_error: 'stored message cannot be decrypted' });
    expect(receiver.requests).toHaveLength(0);
  });
});
