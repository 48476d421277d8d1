import { placeholders, type Queryable } from './db.js';

export interface MessageRow {
  id: string;
  tenant_id: string;
  event_type: string;
  /** Envelope of the raw body exactly as it is sent. */
  payload: Buffer;
  idempotency_key: string | null;
  idempotency_fingerprint: string | null;
  created_at: number;
  fanned_out_at: number | null;
}

export async function insertMessage(q: Queryable, row: MessageRow): Promise<void> {
  await q.run(
    `INSERT INTO messages (id, tenant_id, event_type, payload, idempotency_key, idempotency_fingerprint,
       created_at, fanned_out_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      row.id,
      row.tenant_id,
      row.event_type,
      row.payload,
      row.idempotency_key,
      row.idempotency_fingerprint,
      row.created_at,
      row.fanned_out_at,
    ],
  );
}

export async function findByIdempotencyKey(
  q: Queryable,
  tenantId: string,
  key: string,
): Promise<Pick<MessageRow, 'id' | 'idempotency_fingerprint' | 'created_at'> | undefined> {
  return q.one(
    'SELECT id, idempotency_fingerprint, created_at FROM messages WHERE tenant_id = $1 AND idempotency_key = $2',
    [tenantId, key],
  );
}

/** An expired idempotency key is released so the same key can name a new message. */
export async function releaseIdempotencyKey(q: Queryable, id: string): Promise<void> {
  await q.run('UPDATE messages SET idempotency_key = NULL WHERE id = $1', [id]);
}

export async function getPayloads(
  q: Queryable,
  ids: readonly string[],
): Promise<Pick<MessageRow, 'id' | 'payload'>[]> {
  if (ids.length === 0) return [];
  return q.all(`SELECT id, payload FROM messages WHERE id IN (${placeholders(ids.length)})`, ids);
}

/**
 * Messages not yet fanned out, oldest first. Inside the caller's transaction; on PostgreSQL the rows
 * are locked and rows another worker holds are skipped, so each message is fanned out once.
 */
export async function claimForFanout(
  q: Queryable,
  limit: number,
): Promise<Pick<MessageRow, 'id' | 'tenant_id' | 'event_type'>[]> {
  const lock = q.dialect === 'postgres' ? 'FOR UPDATE SKIP LOCKED' : '';
  return q.all(
    `SELECT id, tenant_id, event_type FROM messages WHERE fanned_out_at IS NULL
     ORDER BY created_at LIMIT $1 ${lock}`,
    [limit],
  );
}

export async function markFannedOut(q: Queryable, ids: readonly string[], now: number): Promise<void> {
  if (ids.length === 0) return;
  await q.run(`UPDATE messages SET fanned_out_at = $1 WHERE id IN (${placeholders(ids.length, 2)})`, [
    now,
    ...ids,
  ]);
}

export async function countAwaitingFanout(q: Queryable): Promise<number> {
  const row = await q.one<{ n: number }>('SELECT COUNT(*) AS n FROM messages WHERE fanned_out_at IS NULL');
  return Number(row?.n ?? 0);
}
