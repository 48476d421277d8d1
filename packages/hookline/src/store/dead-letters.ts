import { jsonRecords, placeholders, type Queryable, type SqlValue } from './db.js';

export interface DeadLetterRow {
  id: string;
  delivery_id: string;
  tenant_id: string;
  endpoint_id: string;
  message_id: string;
  event_type: string;
  attempts: number;
  last_error: string | null;
  /** Envelope of `{body, headers}` as first sent. */
  original: Buffer;
  died_at: number;
  replayed_at: number | null;
  replay_delivery_id: string | null;
  /** The message's ordering key: a replay joins the back of its line. */
  ordering_key: string | null;
}

export type DeadLetterSummary = Omit<DeadLetterRow, 'original'> & { replay_status: string | null };

const DEAD_LETTER_COLUMNS = 13;

/** Writes the records of deliveries that died, one multi-row insert per few hundred. */
export async function insertDeadLetters(q: Queryable, rows: readonly DeadLetterRow[]): Promise<void> {
  for (let start = 0; start < rows.length; start += 200) {
    const chunk = rows.slice(start, start + 200);
    const params: SqlValue[] = [];
    const tuples = chunk.map((row, i) => {
      params.push(row.id, row.delivery_id, row.tenant_id, row.endpoint_id, row.message_id, row.event_type);
      params.push(
        row.attempts,
        row.last_error,
        row.original,
        row.died_at,
        row.replayed_at,
        row.replay_delivery_id,
        row.ordering_key,
      );
      return `(${placeholders(DEAD_LETTER_COLUMNS, i * DEAD_LETTER_COLUMNS + 1)})`;
    });
    await q.run(
      `INSERT INTO dead_letters (id, delivery_id, tenant_id, endpoint_id, message_id, event_type, attempts,
         last_error, original, died_at, replayed_at, replay_delivery_id, ordering_key)
       VALUES ${tuples.join(', ')}`,
      params,
    );
  }
}

/** Replays that died again update the records they came from instead of adding second ones. */
export async function recordReplayDeaths(
  q: Queryable,
  deaths: readonly { id: string; attempts: number; lastError: string | null }[],
  now: number,
): Promise<void> {
  if (deaths.length === 0) return;
  const t = jsonRecords(q.dialect, 1, { item_id: 'text', item_attempts: 'int', item_error: 'text' });
  await q.run(
    `UPDATE dead_letters SET attempts = dead_letters.attempts + t.item_attempts, last_error = t.item_error,
       died_at = $2
     FROM ${t} WHERE dead_letters.id = t.item_id`,
    [
      JSON.stringify(
        deaths.map((d) => ({ item_id: d.id, item_attempts: d.attempts, item_error: d.lastError })),
      ),
      now,
    ],
  );
}

export interface DeadLetterFilter {
  tenantId?: string | null;
  endpointId?: string | null;
  since?: number | null;
  until?: number | null;
}

function where(filter: DeadLetterFilter, params: SqlValue[]): string {
  const clauses: string[] = [];
  const add = (sql: string, value: SqlValue) => {
    params.push(value);
    clauses.push(sql.replace('?', `$${params.length}`));
  };
  if (filter.tenantId) add('dl.tenant_id = ?', filter.tenantId);
  if (filter.endpointId) add('dl.endpoint_id = ?', filter.endpointId);
  if (filter.since != null) add('dl.died_at >= ?', filter.since);
  if (filter.until != null) add('dl.died_at < ?', filter.until);
  return clauses.length ? clauses.join(' AND ') : '1 = 1';
}

const SUMMARY_COLUMNS = `dl.id, dl.delivery_id, dl.tenant_id, dl.endpoint_id, dl.message_id, dl.event_type,
  dl.attempts, dl.last_error, dl.died_at, dl.replayed_at, dl.replay_delivery_id, dl.ordering_key,
  r.status AS replay_status`;

export async function listDeadLetters(
  q: Queryable,
  filter: DeadLetterFilter,
  limit: number,
  before: string | null,
): Promise<DeadLetterSummary[]> {
  const params: SqlValue[] = [];
  let sql = `SELECT ${SUMMARY_COLUMNS} FROM dead_letters dl LEFT JOIN deliveries r ON r.id = dl.replay_delivery_id
    WHERE ${where(filter, params)}`;
  if (before) {
    params.push(before);
    sql += ` AND dl.id < $${params.length}`;
  }
  params.push(limit);
  return q.all<DeadLetterSummary>(`${sql} ORDER BY dl.id DESC LIMIT $${params.length}`, params);
}

export async function getDeadLetter(
  q: Queryable,
  id: string,
): Promise<(DeadLetterRow & { replay_status: string | null }) | undefined> {
  return q.one(
    `SELECT dl.*, r.status AS replay_status FROM dead_letters dl
     LEFT JOIN deliveries r ON r.id = dl.replay_delivery_id WHERE dl.id = $1`,
    [id],
  );
}

/**
 * Dead letters matching a filter that bulk replay should queue: never replayed, or whose last replay
 * failed again. Records with a replay under way or already delivered are left alone.
 */
export async function listReplayable(
  q: Queryable,
  filter: DeadLetterFilter,
  limit: number,
  after: string | null,
): Promise<DeadLetterRow[]> {
  const params: SqlValue[] = [];
  let sql = `SELECT dl.* FROM dead_letters dl LEFT JOIN deliveries r ON r.id = dl.replay_delivery_id
    WHERE ${where(filter, params)} AND (r.id IS NULL OR r.status NOT IN ('held', 'pending', 'delivering', 'succeeded'))`;
  if (after) {
    params.push(after);
    sql += ` AND dl.id > $${params.length}`;
  }
  params.push(limit);
  return q.all<DeadLetterRow>(`${sql} ORDER BY dl.id LIMIT $${params.length}`, params);
}

/** Marks a replay only if no other replay of the record started meanwhile (compare-and-set). */
export async function markReplayed(
  q: Queryable,
  id: string,
  previousReplayDeliveryId: string | null,
  replayDeliveryId: string,
  now: number,
): Promise<boolean> {
  const changed = await q.run(
    `UPDATE dead_letters SET replayed_at = $3, replay_delivery_id = $4
     WHERE id = $1 AND COALESCE(replay_delivery_id, '') = $2`,
    [id, previousReplayDeliveryId ?? '', now, replayDeliveryId],
  );
  return changed === 1;
}

export async function countDeadLetters(q: Queryable): Promise<number> {
  const row = await q.one<{ n: number }>('SELECT COUNT(*) AS n FROM dead_letters');
  return Number(row?.n ?? 0);
}
