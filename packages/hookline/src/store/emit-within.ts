// The one statement a producer runs inside the identity product's own transaction (PostgreSQL
// only: the producer exists for that database; producer/producer.ts, docs/producers.md). It runs on
// the product's connection, whose search_path is the product's: every name is qualified with
// hookline's schema.
//
// It writes only new rows: the messages, each with its fan-out queue row (so the workers fan them out
// after the commit), and, for a tenant never seen before, its tenant row. It takes no lock on any row other
// transactions need: no endpoint queue row, no counter, no existing tenant row. A product
// transaction may stay open for seconds; whatever it holds until then must be its own. The ordering
// numbers come from a sequence, whose nextval() is not transactional and takes no lasting lock.
import { scopedChannel, WORK_CHANNEL } from './postgres/channel.js';

/** What the caller's connection must offer: pg's `query(text, values)` (a pg Client or PoolClient). */
export interface SqlClient {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

export interface OutboxMessage {
  id: string;
  tenantId: string;
  type: string;
  /** The sealed body (crypto/envelope.ts), bound to `id`. */
  payload: Buffer;
  idempotencyKey: string | null;
  fingerprint: string | null;
  /** The keyed hash of the ordering key (engine/sealing.ts, storedKeys), and the key sealed. */
  orderingKey: string | null;
  orderingKeySealed: Buffer | null;
}

/**
 * What became of each message, in input order: `written` is the row that now holds the message's
 * place — the message itself, or the earlier message of the same tenant and Idempotency-Key — or
 * null when that earlier message's key had expired and was released by this statement (the message
 * is then to be written again, now that its key is free).
 */
export interface OutboxOutcome {
  written: { id: string; fingerprint: string | null; createdAt: number } | null;
}

const statements = new Map<string, string>();

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * The statement for `schema`. One round trip whatever the number of messages: the rows travel as
 * arrays. Idempotency-Keys as store/messages.ts keeps them (a partial unique index on tenant and
 * key): a key already taken is answered with the row that took it — DO UPDATE, not DO NOTHING,
 * because a row committed by a concurrent transaction after this statement's snapshot was taken is
 * invisible to any SELECT here, and DO UPDATE is what returns it. Its SET changes nothing unless the
 * earlier use is older than the window; then it releases the key (sets it NULL), as the HTTP emit
 * does, and the caller writes the message again. nextval() in the ORDER BY'd SELECT runs after the
 * sort, so a key's messages are numbered in input order. The NOTIFY is delivered at commit, and
 * never after a rollback.
 */
function statementFor(schema: string): string {
  let sql = statements.get(schema);
  if (sql) return sql;
  const s = quoteIdent(schema);
  const sequence = `${s}.ordering_seq`.replaceAll("'", "''");
  sql = `WITH input AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
    $12::text[])
    WITH ORDINALITY AS i(id, tenant_id, event_type, payload_hex, idempotency_key, fingerprint, ordering_key,
      ordering_key_hex, ord)
),
new_tenants AS (
  INSERT INTO ${s}.tenants (id, created_at)
  SELECT DISTINCT i.tenant_id, $8::bigint FROM input i
  WHERE NOT EXISTS (SELECT 1 FROM ${s}.tenants t WHERE t.id = i.tenant_id)
  ON CONFLICT (id) DO NOTHING
),
written AS (
  INSERT INTO ${s}.messages AS m (id, tenant_id, event_type, payload, idempotency_key,
    idempotency_fingerprint, created_at, ordering_key, ordering_seq, ordering_key_sealed)
  SELECT i.id, i.tenant_id, i.event_type, decode(i.payload_hex, 'hex'), i.idempotency_key, i.fingerprint,
    $8::bigint, i.ordering_key,
    CASE WHEN i.ordering_key IS NULL THEN NULL ELSE nextval('${sequence}') END,
    decode(i.ordering_key_hex, 'hex')
  FROM input i ORDER BY i.ord
  ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL
  DO UPDATE SET idempotency_key =
    CASE WHEN m.created_at <= $8::bigint - $9::bigint THEN NULL ELSE m.idempotency_key END
  RETURNING m.id, m.tenant_id, m.event_type, m.idempotency_key, m.idempotency_fingerprint, m.created_at,
    m.ordering_key, m.ordering_seq
),
queued AS (
  -- The rows this statement inserted, not those an Idempotency-Key answered with.
  INSERT INTO ${s}.fanout_queue (message_id, tenant_id, event_type, created_at, ordering_key, ordering_seq)
  SELECT w.id, w.tenant_id, w.event_type, w.created_at, w.ordering_key, w.ordering_seq
  FROM written w JOIN input i ON i.id = w.id
),
woken AS (SELECT pg_notify($10, $11) AS sent)
SELECT i.ord, w.id, w.idempotency_fingerprint AS fingerprint, w.created_at
FROM input i CROSS JOIN woken
LEFT JOIN written w ON w.id = i.id OR (w.tenant_id = i.tenant_id AND w.idempotency_key = i.idempotency_key)
ORDER BY i.ord`;
  statements.set(schema, sql);
  return sql;
}

/**
 * Writes `messages` in the caller's transaction, in one statement, and wakes the workers of
 * `schema`'s installation at commit. `wakePayload` is what the workers' signal reads
 * (store/work-signal.ts: `<origin> fanout`).
 */
export async function insertWithin(
  client: SqlClient,
  schema: string,
  messages: readonly OutboxMessage[],
  now: number,
  idempotencyWindowMs: number,
  wakePayload: string,
): Promise<OutboxOutcome[]> {
  const { rows } = await client.query(statementFor(schema), [
    messages.map((m) => m.id),
    messages.map((m) => m.tenantId),
    messages.map((m) => m.type),
    // Hex text rather than bytea arrays: any client with pg's query shape passes text arrays alike.
    messages.map((m) => m.payload.toString('hex')),
    messages.map((m) => m.idempotencyKey),
    messages.map((m) => m.fingerprint),
    messages.map((m) => m.orderingKey),
    now,
    idempotencyWindowMs,
    scopedChannel(WORK_CHANNEL, schema),
    wakePayload,
    messages.map((m) => m.orderingKeySealed?.toString('hex') ?? null),
  ]);
  return (
    rows as { id: string | null; fingerprint: string | null; created_at: string | number | null }[]
  ).map((r) => ({
    written: r.id === null ? null : { id: r.id, fingerprint: r.fingerprint, createdAt: Number(r.created_at) },
  }));
}
