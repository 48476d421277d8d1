// Ordering keys and Idempotency-Keys are personal data as often as not (a user id, an order number):
// they are stored only as keyed hashes (docs/security.md, "What is stored"), in every table that holds
// them, written by every path (HTTP emit, the in-transaction producer, replays), and migration 14
// converts the rows written in clear before it. Lines and idempotency work on the hashes as they did
// on the values.
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { keyConverter, messageAad } from '../../src/engine/sealing.js';
import { fingerprintText } from '../../src/engine/validate-event.js';
import { newId } from '../../src/ids.js';
import { createProducer } from '../../src/producer/producer.js';
import { insertDeadLetters } from '../../src/store/dead-letters.js';
import { insertDeliveries } from '../../src/store/deliveries.js';
import { insertMessages } from '../../src/store/messages.js';
import { BATCH } from '../../src/store/migrations/014-hashed-keys.js';
import { migrate } from '../../src/store/migrations/index.js';
import { atRest } from '../helpers/at-rest.js';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, TEST_ENCRYPTION_KEY, type TestService } from '../helpers/service.js';
import { PG_URL, STORE_KINDS } from '../helpers/stores.js';
import { createEndpoint, deadLettersOf, deliveriesOf, marker } from './support.js';

const TYPE = 'user.updated';
const DATA = { userId: 'user_at_rest' };

/** POST /v1/events with an ordering_key and an Idempotency-Key; answers the message id. */
async function emitKeyed(
  t: TestService,
  keys: { ordering: string; idempotency: string },
  tenantId = 'acme',
): Promise<string> {
  const res = await t.inject({
    method: 'POST',
    url: '/v1/events',
    headers: {
      authorization: `Bearer ${t.keys.producer}`,
      'content-type': 'application/json',
      'idempotency-key': keys.idempotency,
    },
    payload: JSON.stringify({ tenant_id: tenantId, type: TYPE, data: DATA, ordering_key: keys.ordering }),
  });
  expect(res.statusCode, res.body).toBe(202);
  return res.json<{ id: string }>().id;
}

/** Neither key is anywhere in a copy of the database; `id`, stored in clear, is (the positive control). */
async function expectKeysNowhere(
  t: TestService,
  keys: { ordering: string; idempotency: string },
  id: string,
): Promise<void> {
  const copy = await atRest(t);
  try {
    expect(await copy.hits(id)).toBeGreaterThan(0);
    expect(await copy.hits(keys.ordering)).toBe(0);
    expect(await copy.hits(keys.idempotency)).toBe(0);
  } finally {
    await copy.close();
  }
}

interface KeyColumns {
  ordering_key: string | null;
  idempotency_key?: string | null;
}

describe.each(STORE_KINDS)('ordering and Idempotency-Keys at rest on %s', (kind) => {
  let t: TestService | undefined;
  let r: Receiver | undefined;
  afterEach(async () => {
    await r?.close();
    await t?.close();
    r = t = undefined;
  });

  it('every path stores both keys as keyed hashes, per tenant, and idempotency and replays work on them', async () => {
    t = await startTestService(kind, { worker: true });
    r = await startReceiver(() => ({ status: 500 }));
    await createEndpoint(t, { url: r.url, events: ['user.*'] });
    const keys = { ordering: marker(), idempotency: marker() };
    const hash = (kindOfKey: 'ordering' | 'idempotency', tenant = 'acme') =>
      t!.service.ctx.envelope.keyHash(kindOfKey, tenant, keys[kindOfKey]);

    const id = await emitKeyed(t, keys);
    // The same key again is the same message; another tenant's equal keys are its own.
    expect(await emitKeyed(t, keys)).toBe(id);
    const other = await emitKeyed(t, keys, 'globex');
    expect(other).not.toBe(id);
    if (kind === 'postgres') {
      // The in-transaction producer hashes alike: the HTTP emit's key is found.
      const producer = createProducer({ encryptionKey: TEST_ENCRYPTION_KEY, schema: t.database.schema! });
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        await client.query('BEGIN');
        const within = await producer.emitWithin(client, {
          tenantId: 'acme',
          type: TYPE,
          data: DATA,
          orderingKey: keys.ordering,
          idempotencyKey: keys.idempotency,
        });
        await client.query('COMMIT');
        expect(within.id).toBe(id);
      } finally {
        await client.end();
      }
    }

    const [letter] = await eventually(async () => {
      const found = await deadLettersOf(t!, id);
      return found.length === 1 && found;
    });
    const replay = await t.call(
      'POST',
      `/v1/admin/dead-letters/${letter!.id}/replay`,
      t.keys.instance_manager,
    );
    expect(replay.statusCode, replay.body).toBe(202);
    const deliveries = await eventually(async () => {
      const rows = await deliveriesOf(t!, id);
      return rows.length === 2 && rows;
    });

    const [message] = await t.service.ctx.db.all<KeyColumns>(
      'SELECT ordering_key, idempotency_key FROM messages WHERE id = $1',
      [id],
    );
    expect(message).toEqual({ ordering_key: hash('ordering'), idempotency_key: hash('idempotency') });
    expect(hash('ordering')).not.toBe(hash('ordering', 'globex'));
    const [otherMessage] = await t.service.ctx.db.all<KeyColumns>(
      'SELECT ordering_key, idempotency_key FROM messages WHERE id = $1',
      [other],
    );
    expect(otherMessage).toEqual({
      ordering_key: hash('ordering', 'globex'),
      idempotency_key: hash('idempotency', 'globex'),
    });
    expect(deliveries.map((d) => d.ordering_key)).toEqual([hash('ordering'), hash('ordering')]);
    expect(letter!.ordering_key).toBe(hash('ordering'));
    const shown = await t.call('GET', `/v1/admin/dead-letters/${letter!.id}`, t.keys.instance_manager);
    expect(shown.json<{ ordering_key: string }>().ordering_key).toBe(keys.ordering);

    await expectKeysNowhere(t, keys, id);
  });

  it('migration 14 hashes the keys of rows written in clear; a retry with the original Idempotency-Key still dedupes', async () => {
    t = await startTestService(kind);
    const { db, envelope } = t.service.ctx;
    const endpoint = await createEndpoint(t, { events: ['user.*'] });
    const keys = { ordering: marker(), idempotency: marker() };
    const now = Date.now();
    // Written the old way: the keys in clear, as emits wrote them before this release. More messages
    // than one batch of the conversion, so it walks on past the first.
    const messages = Array.from({ length: BATCH + 5 }, (_, i) => {
      const id = newId('message', now);
      const input = { tenantId: 'acme', type: TYPE, data: DATA, orderingKey: keys.ordering };
      return {
        id,
        tenant_id: 'acme',
        event_type: TYPE,
        payload: envelope.seal(JSON.stringify({ type: TYPE, data: DATA }), messageAad(id)),
        idempotency_key: i === 0 ? keys.idempotency : null,
        idempotency_fingerprint: i === 0 ? envelope.digest(fingerprintText(input)) : null,
        created_at: now,
        awaits_fanout: false,
        ordering_key: keys.ordering,
        ordering_key_sealed: null,
        trace_context: null,
      };
    });
    const first = messages[0]!.id;
    const deliveryId = newId('delivery', now);
    await db.transaction(async (tx) => {
      await insertMessages(tx, messages);
      const delivery = {
        message_id: first,
        endpoint_id: endpoint.id,
        tenant_id: 'acme',
        event_type: TYPE,
        next_attempt_at: now,
        replay_of: null,
        first_headers: null,
        ordering_key: keys.ordering,
        ordering_seq: 1,
      };
      await insertDeliveries(tx, [{ id: deliveryId, ...delivery }], now);
      await insertDeadLetters(tx, [
        {
          id: newId('deadLetter', now),
          delivery_id: deliveryId,
          tenant_id: 'acme',
          endpoint_id: endpoint.id,
          message_id: first,
          event_type: TYPE,
          attempts: 4,
          last_error: 'HTTP 500',
          last_response: null,
          original: envelope.seal('{}', 'test'),
          died_at: now,
          replayed_at: null,
          replay_delivery_id: null,
          ordering_key: keys.ordering,
        },
      ]);
      // Back to the schema before migration 14.
      await tx.run('ALTER TABLE messages DROP COLUMN ordering_key_sealed');
      for (const c of ['refused_ssrf', 'refused_tls', 'refused_proxy'])
        await tx.run(`ALTER TABLE delivery_stats DROP COLUMN ${c}`);
      await tx.run('DELETE FROM schema_migrations WHERE version = 14');
    });

    // Without the encryption key it cannot hash: it refuses, and changes nothing.
    await expect(migrate(db)).rejects.toThrow(/encryption key/);
    const progress: string[] = [];
    expect((await migrate(db, (m) => progress.push(m), keyConverter(envelope))).applied).toEqual([14]);
    expect(progress).toEqual([
      'applying migration 14: ordering and idempotency keys stored as keyed hashes; refused attempts counted',
      `  messages: ${BATCH + 5} rows with keys hashed`,
      '  deliveries: 1 rows with keys hashed',
      '  dead_letters: 1 rows with keys hashed',
      ...(kind === 'sqlite'
        ? ['rebuilding the database file (VACUUM), so rewritten rows leave no old copies in it']
        : []),
    ]);

    const ordering = envelope.keyHash('ordering', 'acme', keys.ordering);
    const stored = await db.all<KeyColumns>('SELECT ordering_key, idempotency_key FROM messages ORDER BY id');
    expect(new Set(stored.map((m) => m.ordering_key))).toEqual(new Set([ordering]));
    expect(stored.filter((m) => m.idempotency_key !== null).map((m) => m.idempotency_key)).toEqual([
      envelope.keyHash('idempotency', 'acme', keys.idempotency),
    ]);
    for (const table of ['deliveries', 'dead_letters']) {
      expect(await db.all<KeyColumns>(`SELECT ordering_key FROM ${table}`)).toEqual([
        { ordering_key: ordering },
      ]);
    }
    // Operators still read the ordering key itself, now opened from the message.
    const letters = await t.call('GET', '/v1/admin/dead-letters', t.keys.instance_manager);
    expect(letters.json<{ data: { ordering_key: string }[] }>().data.map((d) => d.ordering_key)).toEqual([
      keys.ordering,
    ]);
    // The producer's retry with the key it used before the upgrade finds its message.
    expect(await emitKeyed(t, keys)).toBe(first);

    await expectKeysNowhere(t, keys, first);
  });
});
