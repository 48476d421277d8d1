import { forUpdate, placeholders, type Queryable, type SqlValue } from './db.js';

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
  /** The last endpoint id a partial fan-out reached (delivery/fanout.ts); null before it starts. */
  fanout_cursor?: string | null;
}

const MESSAGE_COLUMNS = 8;

/** Inserts messages, one multi-row statement per few hundred (group commit of emits). */
export async function insertMessages(q: Queryable, rows: readonly MessageRow[]): Promise<void> {
  for (let start = 0; start < rows.length; start += 500) {
    const chunk = rows.slice(start, start + 500);
    const params: SqlValue[] = [];
    const tuples = chunk.map((row, i) => {
      params.push(row.id, row.tenant_id, row.event_type, row.payload, row.idempotency_key);
      params.push(row.idempotency_fingerprint, row.created_at, row.fanned_out_at);
      return `(${placeholders(MESSAGE_COLUMNS, i * MESSAGE_COLUMNS + 1)})`;
    });
    await q.run(
      `INSERT INTO messages (id, tenant_id, event_type, payload, idempotency_key, idempotency_fingerprint,
         created_at, fanned_out_at)
       VALUES ${tuples.join(', ')}`,
      params,
    );
  }
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
): Promise<Pick<MessageRow, 'id' | 'tenant_id' | 'event_type' | 'fanout_cursor'>[]> {
  return q.all(
    `SELECT id, tenant_id, event_type, fanout_cursor FROM messages WHERE fanned_out_at IS NULL
     ORDER BY created_at LIMIT $1 ${forUpdate(q.dialect, true)}`,
    [limit],
  );
}

/** Marks messages fanned out, and records how far a partly fanned-out one has come. */
export async function advanceFanout(
  q: Queryable,
  done: readonly string[],
  partial: { id: string; cursor: string } | null,
  now: number,
): Promise<void> {
  if (done.length > 0) {
    await q.run(`UPDATE messages SET fanned_out_at = $1 WHERE id IN (${placeholders(done.length, 2)})`, [
      now,
      ...done,
    ]);
  }
  if (partial) {
    await q.run('UPDATE messages SET fanout_cursor = $2 WHERE id = $1', [partial.id, partial.cursor]);
  }
}

export async function countAwaitingFanout(q: Queryable): Promise<number> {
  const row = await q.one<{ n: number }>('SELECT COUNT(*) AS n FROM messages WHERE fanned_out_at IS NULL');
  return Number(row?.n ?? 0);
}
