/**
 * The identity product's sign-up handler: the user row and its `user.created` event are written in
 * one PostgreSQL transaction, so the event exists if and only if the user does (docs/producers.md).
 * A crash before COMMIT leaves neither; a rollback (here: the e-mail address is taken) leaves neither.
 *
 *   PRODUCT_DATABASE_URL=postgres://…/app HOOKLINE_SCHEMA=hookline HOOKLINE_ENCRYPTION_KEY=… \
 *     npx tsx examples/signup.ts acme ada@example.test
 *
 * hookline's own processes run with HOOKLINE_DATABASE_URL=postgres://…/app?schema=hookline and the
 * same HOOKLINE_ENCRYPTION_KEY; they deliver the event once the transaction has committed.
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { createProducer, type Producer } from 'hookline';

export async function signUp(
  pool: pg.Pool,
  producer: Producer,
  tenantId: string,
  email: string,
): Promise<{ userId: string; eventId: string }> {
  const userId = `user_${randomUUID().replaceAll('-', '')}`;
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('INSERT INTO users (id, tenant_id, email) VALUES ($1, $2, $3)', [
      userId,
      tenantId,
      email,
    ]);
    // Same transaction, same connection: the event commits or rolls back with the user.
    const { id } = await producer.emitWithin(client, {
      tenantId,
      type: 'user.created',
      data: { userId },
      orderingKey: userId,
    });
    await client.query('COMMIT');
    return { userId, eventId: id };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

async function main(): Promise<void> {
  const [tenantId = 'acme', email = 'ada@example.test'] = process.argv.slice(2);
  const pool = new pg.Pool({ connectionString: process.env.PRODUCT_DATABASE_URL });
  const producer = createProducer({
    encryptionKey: process.env.HOOKLINE_ENCRYPTION_KEY,
    schema: process.env.HOOKLINE_SCHEMA ?? 'hookline',
  });
  try {
    // The product's own table (in the product's schema; hookline's tables are in HOOKLINE_SCHEMA).
    await pool.query(`CREATE TABLE IF NOT EXISTS users (
      id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, email TEXT NOT NULL UNIQUE)`);
    console.log(JSON.stringify(await signUp(pool, producer, tenantId, email)));
  } finally {
    await pool.end();
  }
}

// Run as a script (imported, e.g. by the tests, it only exports signUp).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(1);
  });
}
