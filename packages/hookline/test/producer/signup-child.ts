// The identity product of the sign-up test (signups.test.ts), as a process of its own that the test
// can SIGKILL with transactions open. Sign-ups FROM..TO-1 on CONNECTIONS connections: each inserts a
// user and emits user.created then user.updated (keyed by the user) in one call, then commits, or
// rolls back (~30 %, decided by the index, so a second run decides the same) after the emit. A
// sign-up whose user is already there (done by an earlier run) is skipped. Prints `progress <n>`.
import pg from 'pg';
import { createProducer } from '../../src/producer/producer.js';

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const url = env('SIGNUP_DATABASE_URL');
const productSchema = env('SIGNUP_PRODUCT_SCHEMA');
const from = Number(env('SIGNUP_FROM'));
const to = Number(env('SIGNUP_TO'));
const connections = Number(process.env.SIGNUP_CONNECTIONS ?? '8');
const producer = createProducer({
  encryptionKey: env('HOOKLINE_ENCRYPTION_KEY'),
  schema: env('SIGNUP_HOOKLINE_SCHEMA'),
});

export function rolledBack(i: number): boolean {
  return (i * 7919) % 10 < 3;
}

let next = from;
let done = 0;

async function run(): Promise<void> {
  const client = new pg.Client({
    connectionString: url,
    options: `-c search_path=${productSchema}`,
  });
  await client.connect();
  for (let i = next++; i < to; i = next++) {
    const userId = `user_s${i}`;
    await client.query('BEGIN');
    const inserted = await client.query(
      'INSERT INTO users (id, email) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING',
      [userId, `${userId}@example.test`],
    );
    if (inserted.rowCount === 0) {
      await client.query('ROLLBACK');
      continue;
    }
    await producer.emitManyWithin(client, [
      { tenantId: 'acme', type: 'user.created', data: { userId }, orderingKey: userId },
      { tenantId: 'acme', type: 'user.updated', data: { userId, step: 2 }, orderingKey: userId },
    ]);
    // The transaction stays open a moment after the emit, as a product's does (a SIGKILL lands in it).
    await new Promise((r) => setTimeout(r, i % 5));
    await client.query(rolledBack(i) ? 'ROLLBACK' : 'COMMIT');
    if (++done % 25 === 0) process.stdout.write(`progress ${done}\n`);
  }
  await client.end();
}

await Promise.all(Array.from({ length: connections }, () => run()));
process.stdout.write(`finished ${done}\n`);
