// examples/signup.ts, run as a user runs it: a sign-up inserts the user and emits user.created in one
// transaction; a sign-up that fails (the e-mail address is taken) leaves neither. The example imports
// the package as users do ('hookline', its dist/ build): `npm test` builds first.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_ENCRYPTION_KEY } from '../helpers/service.js';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';
import { received, startRig, type ProducerRig } from './support.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const EXAMPLE = path.join(ROOT, 'examples/signup.ts');

describe.runIf(STORE_KINDS.includes('postgres'))('examples/signup.ts', () => {
  let rig: ProducerRig;
  const productSchema = `product_${randomBytes(6).toString('hex')}`;
  beforeAll(async () => {
    rig = await startRig();
    const admin = await rig.connect();
    await admin.query(`CREATE SCHEMA ${productSchema}`);
  }, 60_000);
  afterAll(async () => {
    const admin = await rig.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${productSchema} CASCADE`);
    await rig.close();
  });

  const signUp = (email: string) =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', EXAMPLE, 'acme', email], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        PRODUCT_DATABASE_URL: `${PG_URL}?options=${encodeURIComponent(`-c search_path=${productSchema}`)}`,
        HOOKLINE_SCHEMA: rig.schema,
        HOOKLINE_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      },
    });

  it('delivers user.created for a committed sign-up, and nothing for a failed one', async () => {
    const { stdout } = await signUp('ada@example.test');
    const { userId, eventId } = JSON.parse(stdout) as { userId: string; eventId: string };
    const [request] = await rig.receiver.waitFor(1, 20_000);
    expect(request!.headers['hook-id']).toBe(eventId);
    expect(JSON.parse(request!.body)).toEqual({ type: 'user.created', data: { userId } });

    // The same address again: the insert fails, the transaction rolls back, and no event exists.
    await expect(signUp('ada@example.test')).rejects.toThrow(/duplicate key/);
    const messages = await rig.t.service.ctx.db.all('SELECT id FROM messages');
    expect(messages).toEqual([{ id: eventId }]);
    expect(received(rig.receiver).map((r) => r.id)).toEqual([eventId]);
  });
});
