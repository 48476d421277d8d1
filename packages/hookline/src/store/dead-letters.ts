import {
  blobFromHex,
  forUpdate,
  jsonRecords,
  limitParam,
  placeholders,
  type Db,
  type Queryable,
  type SqlValue,
} from './db.js';

export interface DeadLetterRow {
  id: string;
  delivery_id: string;
  tenant_id: string;
  endpoint_id: string;
  message_id: string;
  event_type: string;
  attempts: number;
  /** Why the last attempt failed, in hookline's own words (engine/last-error.ts). */
  last_error: string | null;
  /** The start of the subscriber's last answer, sealed (engine/last-error.ts); null if none. */
  last_response: Buffer | null;
  /** Envelope of `{body, headers}` as first sent. */
  original: Buffer;
  died_at: number;
  replayed_at: number | null;
  replay_delivery_id: string | null;
  /** The message's ordering key's keyed hash: a replay joins the back of its line. */
  ordering_key: string | null;
}

export type DeadLetterSummary = Omit<DeadLetterRow, 'original'> & {
  replay_status: string | null;
  /** The message's ordering key, sealed (engine/sealing.ts, openOrderingKey); null if unkeyed. */
  ordering_key_sealed: Buffer | null;
};

const DEAD_LETTER_COLUMNS = 14;

/** The row of `counters` that holds how many dead letters there are (migration 8). */
const DEAD_LETTERS_COUNTER = 'dead_letters';
/**
 * The row of `counters` that holds how many of them await an operator (migration 9): not replayed, or
 * whose latest replay died or was cancelled. It moves with the rows' `awaiting` flag, always in the
 * transaction that flips it, and after the dead-letter rows: the lock order of insertDeadLetters.
 */
const AWAITING_COUNTER = 'dead_letters_awaiting';

/**
 * Sets `awaiting` on the given dead letters and moves the counter by the rows that changed: idempotent,
 * so a record replayed twice, or dying twice, is counted once.
 */
async function setAwaiting(q: Queryable, ids: readonly string[], awaiting: 0 | 1): Promise<void> {
  if (ids.length === 0) return;
  let changed = 0;
  for (let start = 0; start < ids.length; start += 500) {
    const chunk = ids.slice(start, start + 500);
    changed += await q.run(
      `UPDATE dead_letters SET awaiting = ${awaiting}
       WHERE awaiting = ${1 - awaiting} AND id IN (${placeholders(chunk.length)})`,
      chunk,
    );
  }
  if (changed === 0) return;
  await q.run(`UPDATE counters SET value = value + $1 WHERE name = '${AWAITING_COUNTER}'`, [
    awaiting === 1 ? changed : -changed,
  ]);
}

/** The dead letters whose replays were cancelled (their endpoint deleted) await an operator again. */
export async function reopenDeadLetters(q: Queryable, ids: readonly string[]): Promise<void> {
  await setAwaiting(q, ids, 1);
}

/**
 * Writes the records of deliveries that died, one multi-row insert per few hundred, and adds them to
 * the dead-letter count (countDeadLetters), in the caller's transaction. Only outcome flushes write
 * dead letters, and each takes the counter's row at the same point, after its deliveries: it adds no
 * lock-order cycle (store/endpoint-queues.ts, lockQueues; docs/architecture.md, "Endpoint queues").
 */
export async function insertDeadLetters(q: Queryable, rows: readonly DeadLetterRow[]): Promise<void> {
  if (rows.length === 0) return;
  for (let start = 0; start < rows.length; start += 200) {
    const chunk = rows.slice(start, start + 200);
    const params: SqlValue[] = [];
    const tuples = chunk.map((row, i) => {
      params.push(row.id, row.delivery_id, row.tenant_id, row.endpoint_id, row.message_id, row.event_type);
      params.push(
        row.attempts,
        row.last_error,
        row.last_response,
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
         last_error, last_response, original, died_at, replayed_at, replay_delivery_id, ordering_key)
       VALUES ${tuples.join(', ')}`,
      params,
    );
  }
  // New records await an operator: both counts move, the awaiting one first, the order every
  // transaction takes the two rows in (recountDeadLetters).
  await q.run(`UPDATE counters SET value = value + $1 WHERE name = '${AWAITING_COUNTER}'`, [rows.length]);
  await q.run(`UPDATE counters SET value = value + $1 WHERE name = '${DEAD_LETTERS_COUNTER}'`, [rows.length]);
}

/** Replays that died again update the records they came from instead of adding second ones. */
export async function recordReplayDeaths(
  q: Queryable,
  deaths: readonly { id: string; attempts: number; lastError: string | null; lastResponse: Buffer | null }[],
  now: number,
): Promise<void> {
  if (deaths.length === 0) return;
  const t = jsonRecords(q.dialect, 1, {
    item_id: 'text',
    item_attempts: 'int',
    item_error: 'text',
    item_response: 'text',
  });
  await q.run(
    `UPDATE dead_letters SET attempts = dead_letters.attempts + t.item_attempts, last_error = t.item_error,
       last_response = ${blobFromHex(q.dialect, 't.item_response')}, died_at = $2
     FROM ${t} WHERE dead_letters.id = t.item_id`,
    [
      JSON.stringify(
        deaths.map((d) => ({
          item_id: d.id,
          item_attempts: d.attempts,
          item_error: d.lastError,
          item_response: d.lastResponse?.toString('hex') ?? null,
        })),
      ),
      now,
    ],
  );
  // Their replay died: they await an operator again.
  await setAwaiting(
    q,
    deaths.map((d) => d.id),
    1,
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
  dl.attempts, dl.last_error, dl.last_response, dl.died_at, dl.replayed_at, dl.replay_delivery_id, dl.ordering_key,
  r.status AS replay_status, m.ordering_key_sealed`;
/** The latest replay's delivery, and the message for its sealed ordering key (messages outlive their dead letters). */
const SUMMARY_JOINS = `LEFT JOIN deliveries r ON r.id = dl.replay_delivery_id
  LEFT JOIN messages m ON m.id = dl.message_id`;

export async function listDeadLetters(
  q: Queryable,
  filter: DeadLetterFilter,
  limit: number,
  before: string | null,
): Promise<DeadLetterSummary[]> {
  const params: SqlValue[] = [];
  let sql = `SELECT ${SUMMARY_COLUMNS} FROM dead_letters dl ${SUMMARY_JOINS}
    WHERE ${where(filter, params)}`;
  if (before) {
    params.push(before);
    sql += ` AND dl.id < $${params.length}`;
  }
  params.push(limit);
  return q.all<DeadLetterSummary>(`${sql} ORDER BY dl.id DESC ${limitParam(params.length)}`, params);
}

export async function getDeadLetter(
  q: Queryable,
  id: string,
): Promise<(DeadLetterRow & DeadLetterSummary) | undefined> {
  return q.one(
    `SELECT dl.*, r.status AS replay_status, m.ordering_key_sealed FROM dead_letters dl ${SUMMARY_JOINS}
     WHERE dl.id = $1`,
    [id],
  );
}

/** What a bulk-replay job needs of a dead letter: never its sealed original. */
export interface ReplayCandidate {
  id: string;
  tenant_id: string;
  endpoint_id: string;
  message_id: string;
  event_type: string;
  ordering_key: string | null;
  replay_delivery_id: string | null;
  /** The latest replay's delivery status, null if never replayed. */
  replay_status: string | null;
  /** null when the endpoint row is missing. */
  endpoint_status: string | null;
}

/** The next dead letters of a job's filter after `after`, up to and including `last`, in id order. */
export async function replayCandidates(
  q: Queryable,
  filter: DeadLetterFilter,
  after: string,
  last: string,
  limit: number,
): Promise<ReplayCandidate[]> {
  const params: SqlValue[] = [];
  const filtered = where(filter, params);
  params.push(after, last, limit);
  const n = params.length;
  return q.all<ReplayCandidate>(
    `SELECT dl.id, dl.tenant_id, dl.endpoint_id, dl.message_id, dl.event_type, dl.ordering_key,
       dl.replay_delivery_id, r.status AS replay_status, e.status AS endpoint_status
     FROM dead_letters dl
     LEFT JOIN deliveries r ON r.id = dl.replay_delivery_id
     LEFT JOIN endpoints e ON e.id = dl.endpoint_id
     WHERE ${filtered} AND dl.id > $${n - 2} AND dl.id <= $${n - 1}
     ORDER BY dl.id ${limitParam(n)}`,
    params,
  );
}

/** How many dead letters a filter matches, and the newest of them: the extent of a bulk-replay job. */
export async function measureFilter(
  q: Queryable,
  filter: DeadLetterFilter,
): Promise<{ count: number; last: string | null }> {
  const params: SqlValue[] = [];
  const row = await q.one<{ n: number | string; last: string | null }>(
    `SELECT COUNT(*) AS n, MAX(dl.id) AS last FROM dead_letters dl WHERE ${where(filter, params)}`,
    params,
  );
  return { count: Number(row?.n ?? 0), last: row?.last ?? null };
}

/**
 * Marks many replays at once, each only if no other replay of its record started meanwhile
 * (compare-and-set on the previous replay); answers the ids that were marked.
 */
export async function markReplayedMany(
  q: Queryable,
  items: readonly { id: string; previousReplayDeliveryId: string | null; replayDeliveryId: string }[],
  now: number,
): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  const t = jsonRecords(q.dialect, 1, { item_id: 'text', item_previous: 'text', item_delivery: 'text' });
  const rows = await q.all<{ id: string }>(
    `UPDATE dead_letters SET replayed_at = $2, replay_delivery_id = t.item_delivery
     FROM ${t}
     WHERE dead_letters.id = t.item_id AND COALESCE(dead_letters.replay_delivery_id, '') = t.item_previous
     RETURNING id`,
    [
      JSON.stringify(
        items.map((i) => ({
          item_id: i.id,
          item_previous: i.previousReplayDeliveryId ?? '',
          item_delivery: i.replayDeliveryId,
        })),
      ),
      now,
    ],
  );
  // A replay is queued: the operator has acted on these.
  await setAwaiting(
    q,
    rows.map((r) => r.id),
    0,
  );
  return new Set(rows.map((r) => r.id));
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
  if (changed === 1) await setAwaiting(q, [id], 0);
  return changed === 1;
}

/**
 * Counts the dead letters, and those awaiting an operator, afresh and sets the counters to them: the
 * hourly retention job's safety net for dead letters deleted by hand (docs/scaling.md). The counters'
 * rows are locked before the counts, so a transaction moving them meanwhile has either committed, and
 * is counted, or waits and moves them afterwards.
 */
export async function recountDeadLetters(db: Db): Promise<DeadLetterCounts> {
  return db.transaction(async (tx) => {
    // The awaiting row first, as insertDeadLetters takes them ('dead_letters_awaiting' sorts last).
    await tx.all(
      `SELECT value FROM counters WHERE name IN ($1, $2) ORDER BY name DESC ${forUpdate(tx.dialect)}`,
      [DEAD_LETTERS_COUNTER, AWAITING_COUNTER],
    );
    const row = await tx.one<{ n: number; awaiting: number | null }>(
      'SELECT COUNT(*) AS n, SUM(awaiting) AS awaiting FROM dead_letters',
    );
    const counts = { stored: Number(row?.n ?? 0), awaiting: Number(row?.awaiting ?? 0) };
    // An upsert: a counter row lost to a hand-made DELETE comes back.
    await tx.run(
      `INSERT INTO counters (name, value) VALUES ($1, $2), ($3, $4)
       ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
      [DEAD_LETTERS_COUNTER, counts.stored, AWAITING_COUNTER, counts.awaiting],
    );
    return counts;
  });
}

export interface DeadLetterCounts {
  /** Every dead-letter record kept. */
  stored: number;
  /** Those not replayed, or whose latest replay died or was cancelled. */
  awaiting: number;
}

/** How many dead letters there are, and how many await an operator: one read, whatever their number. */
export async function countDeadLetters(q: Queryable): Promise<DeadLetterCounts> {
  const rows = await q.all<{ name: string; value: number | string }>(
    `SELECT name, value FROM counters WHERE name IN ('${DEAD_LETTERS_COUNTER}', '${AWAITING_COUNTER}')`,
  );
  const value = (name: string) => Number(rows.find((r) => r.name === name)?.value ?? 0);
  return { stored: value(DEAD_LETTERS_COUNTER), awaiting: value(AWAITING_COUNTER) };
}

/** Dead letters awaiting an operator per endpoint of a tenant (the partial index of migration 9). */
export async function countAwaitingByEndpoint(q: Queryable, tenantId: string): Promise<Map<string, number>> {
  const rows = await q.all<{ endpoint_id: string; n: number | string }>(
    `SELECT endpoint_id, COUNT(*) AS n FROM dead_letters WHERE tenant_id = $1 AND awaiting = 1
     GROUP BY endpoint_id`,
    [tenantId],
  );
  return new Map(rows.map((r) => [r.endpoint_id, Number(r.n)]));
}
