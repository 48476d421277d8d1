import {
  forUpdate,
  jsonRecords,
  jsonTextArray,
  limitParam,
  oneOfFewShapes,
  placeholders,
  type Queryable,
  type SqlValue,
} from './db.js';

export interface MessageRow {
  id: string;
  tenant_id: string;
  event_type: string;
  /** Envelope of the raw body exactly as it is sent. */
  payload: Buffer;
  idempotency_key: string | null;
  idempotency_fingerprint: string | null;
  created_at: number;
  /**
   * Whether the workers fan it out: written with a row in fanout_queue. False for a message fanned out
   * in its emit's own transaction (engine/fanout.ts, insertAndFanOut). Not a column: a message is never
   * changed after its insert (migration 016).
   */
  awaits_fanout: boolean;
  /**
   * Deliveries of messages sharing a key go one at a time per endpoint, in emit order (§6). The key's
   * keyed hash, never the key (engine/sealing.ts, storedKeys).
   */
  ordering_key: string | null;
  /** The ordering key sealed, for operators (dead letters show it); null for an unkeyed message. */
  ordering_key_sealed: Buffer | null;
  /** The emit's W3C `traceparent` when tracing is on (telemetry/tracing.ts), else null. */
  trace_context: string | null;
}

/**
 * The `ordering_seq` of keyed messages comes from the database's one ordering counter: a sequence on
 * PostgreSQL, taken by each row's own SQL; on SQLite, where the writer is alone, a counter row moved
 * once per statement. The numbers grow in commit order wherever one commit happens before the other
 * starts, which is all "in the order their emits were acknowledged" can ask of concurrent emits.
 */
async function takeOrderingSeqs(q: Queryable, count: number): Promise<number> {
  const row = await q.one<{ value: number }>(
    "UPDATE sequences SET value = value + $1 WHERE name = 'ordering_seq' RETURNING value",
    [count],
  );
  return Number(row!.value) - count + 1;
}

/** Takes `count` ordering numbers in one statement, ascending (replays joining the back of their lines). */
export async function nextOrderingSeqs(q: Queryable, count: number): Promise<number[]> {
  if (count === 0) return [];
  if (q.dialect === 'sqlite') {
    const first = await takeOrderingSeqs(q, count);
    return Array.from({ length: count }, (_, i) => first + i);
  }
  const rows = await q.all<{ value: string }>(
    "SELECT nextval('ordering_seq') AS value FROM generate_series(1, $1::int)",
    [count],
  );
  return rows.map((r) => Number(r.value)).sort((a, b) => a - b);
}

const INSERT_COLUMNS = `id, tenant_id, event_type, payload, idempotency_key,
  idempotency_fingerprint, created_at, ordering_key, ordering_key_sealed, ordering_seq`;
const INSERT_MESSAGE = `INSERT INTO messages (${INSERT_COLUMNS})`;
/**
 * With the emits' trace context (tracing on): without tracing, PostgreSQL's multi-row insert leaves
 * the column out rather than bind a NULL per row (docs/operators.md, "Tracing": nothing spent).
 */
const INSERT_TRACED_MESSAGE = `INSERT INTO messages (${INSERT_COLUMNS}, trace_context)`;
/** SQLite's one-row insert: one text, so the prepared-statement cache finds it without building it per row. */
const INSERT_MESSAGE_ROW = `${INSERT_TRACED_MESSAGE} VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`;
/** A fanout_queue row's columns after `message_id`, named as in the message's row. */
const QUEUED_FROM_MESSAGE = 'tenant_id, event_type, created_at, ordering_key, ordering_seq, trace_context';
const QUEUE_COLUMNS = `message_id, ${QUEUED_FROM_MESSAGE}`;
const QUEUE_FANOUT_ROW = `INSERT INTO fanout_queue (${QUEUE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)`;

/**
 * Inserts messages (group commit of emits), each that awaits fan-out with its fanout_queue row: on
 * PostgreSQL one statement per few hundred, a round trip each; on SQLite, where a statement costs no
 * round trip, prepared row statements, so no statement text is built and prepared per group size.
 * Answers each row's `ordering_seq` (null for unkeyed rows), in the order of `rows`.
 */
export async function insertMessages(q: Queryable, rows: readonly MessageRow[]): Promise<(number | null)[]> {
  if (q.dialect === 'sqlite') {
    const keyed = rows.filter((r) => r.ordering_key !== null).length;
    let seq = keyed > 0 ? await takeOrderingSeqs(q, keyed) : 0;
    const seqs: (number | null)[] = [];
    for (const row of rows) {
      const rowSeq = row.ordering_key === null ? null : seq++;
      seqs.push(rowSeq);
      await q.run(INSERT_MESSAGE_ROW, [
        row.id,
        row.tenant_id,
        row.event_type,
        row.payload,
        row.idempotency_key,
        row.idempotency_fingerprint,
        row.created_at,
        row.ordering_key,
        row.ordering_key_sealed,
        rowSeq,
        row.trace_context,
      ]);
      if (row.awaits_fanout) {
        await q.run(QUEUE_FANOUT_ROW, [
          row.id,
          row.tenant_id,
          row.event_type,
          row.created_at,
          row.ordering_key,
          rowSeq,
          row.trace_context,
        ]);
      }
    }
    return seqs;
  }
  const seqOf = new Map<string, number>();
  for (let start = 0; start < rows.length; start += MAX_PG_INSERT_ROWS) {
    const chunk = rows.slice(start, start + MAX_PG_INSERT_ROWS);
    const traced = chunk.some((r) => r.trace_context !== null);
    const keyed = chunk.some((r) => r.ordering_key !== null);
    const awaiting = chunk.filter((r) => r.awaits_fanout);
    const shape: InsertShape = {
      rows: padded(chunk.length),
      traced,
      keyed,
      queued: awaiting.length === 0 ? 'none' : awaiting.length === chunk.length ? 'all' : 'some',
    };
    const params: SqlValue[] = [];
    for (const row of chunk) {
      params.push(row.id, row.tenant_id, row.event_type, row.payload, row.idempotency_key);
      params.push(row.idempotency_fingerprint, row.created_at, row.ordering_key, row.ordering_key_sealed);
      if (traced) params.push(row.trace_context);
    }
    const columns = MESSAGE_PARAM_TYPES.length + (traced ? 1 : 0);
    while (params.length < shape.rows * columns) params.push(null);
    if (shape.queued === 'some') params.push(JSON.stringify(awaiting.map((r) => r.id)));
    const sql = insertMessagesSql(shape);
    if (!keyed) {
      await q.run(sql, params);
      continue;
    }
    const written = await q.all<{ id: string; ordering_seq: string | null }>(sql, params);
    for (const k of written) if (k.ordering_seq !== null) seqOf.set(k.id, Number(k.ordering_seq));
  }
  return rows.map((r) => seqOf.get(r.id) ?? null);
}

/** Rows in one PostgreSQL insert of messages: at most 5,120 parameters. */
const MAX_PG_INSERT_ROWS = 512;

/** The next power of two: the row count a PostgreSQL insert of `n` messages is padded to. */
function padded(n: number): number {
  let rows = 1;
  while (rows < n) rows *= 2;
  return rows;
}

interface InsertShape {
  /** Rows of the VALUES list, a power of two; those past the messages are all NULL and skipped. */
  rows: number;
  /** With the emits' trace context. */
  traced: boolean;
  /** Some message has an ordering key: the statement answers the numbers it took. */
  keyed: boolean;
  /** Which messages get a fanout_queue row: all, none, or those whose ids the last parameter lists. */
  queued: 'all' | 'none' | 'some';
}

/** The parameters' types, in the order insertMessages passes them. */
const MESSAGE_PARAM_TYPES = ['text', 'text', 'text', 'bytea', 'text', 'text', 'bigint', 'text', 'bytea'];
const VALUES_COLUMNS = `id, tenant_id, event_type, payload, idempotency_key, idempotency_fingerprint,
  created_at, ordering_key, ordering_key_sealed`;

const insertSqlByShape = new Map<string, string>();

/**
 * The PostgreSQL insert of a group of messages. Its VALUES list is padded to a power of two of rows,
 * so the statement comes in a few texts, each prepared once per connection (db.ts, oneOfFewShapes):
 * a text per group size was parsed and planned at every emit's commit, half the insert's cost for
 * groups of 16–31. The padding rows are NULL and left out by the WHERE.
 */
function insertMessagesSql(shape: InsertShape): string {
  const key = `${shape.rows} ${shape.traced} ${shape.keyed} ${shape.queued}`;
  let sql = insertSqlByShape.get(key);
  if (sql) return sql;
  const types = shape.traced ? [...MESSAGE_PARAM_TYPES, 'text'] : MESSAGE_PARAM_TYPES;
  const tuples = Array.from(
    { length: shape.rows },
    (_, row) => `(${types.map((type, i) => `$${row * types.length + i + 1}::${type}`).join(', ')})`,
  );
  const trace = shape.traced ? ', trace_context' : '';
  // nextval is taken row by row in the VALUES list's order, for the keyed rows only.
  const insert = `${shape.traced ? INSERT_TRACED_MESSAGE : INSERT_MESSAGE}
    SELECT ${VALUES_COLUMNS}, CASE WHEN ordering_key IS NULL THEN NULL ELSE nextval('ordering_seq') END${trace}
    FROM (VALUES ${tuples.join(', ')}) AS v(${VALUES_COLUMNS}${trace})
    WHERE id IS NOT NULL`;
  if (shape.queued === 'none') sql = shape.keyed ? `${insert} RETURNING id, ordering_seq` : insert;
  else {
    const which =
      shape.queued === 'some'
        ? ` WHERE id IN (${jsonTextArray('postgres', shape.rows * types.length + 1)})`
        : '';
    sql = `WITH written AS (${insert} RETURNING id, ${QUEUED_FROM_MESSAGE}),
      queued AS (INSERT INTO fanout_queue (${QUEUE_COLUMNS}) SELECT id, ${QUEUED_FROM_MESSAGE} FROM written${which})
      SELECT id, ordering_seq FROM written WHERE ordering_seq IS NOT NULL`;
  }
  insertSqlByShape.set(key, oneOfFewShapes(sql));
  return sql;
}

/**
 * Writes a test message (POST /v1/webhooks/:id/test): never in fanout_queue, since its one delivery is
 * written with it, so no fan-out ever sends it to another endpoint; unkeyed and without idempotency.
 */
export async function insertTestMessage(
  q: Queryable,
  row: Pick<MessageRow, 'id' | 'tenant_id' | 'event_type' | 'payload' | 'created_at'>,
): Promise<void> {
  await q.run(
    `INSERT INTO messages (id, tenant_id, event_type, payload, created_at, is_test)
     VALUES ($1, $2, $3, $4, $5, 1)`,
    [row.id, row.tenant_id, row.event_type, row.payload, row.created_at],
  );
}

/**
 * Whether a message of this tenant and ordering key still awaits fan-out: a later message of the key
 * must then wait for the workers' fan-out too, so the line learns of its deliveries in emit order.
 */
export async function keyAwaitsFanout(q: Queryable, tenantId: string, orderingKey: string): Promise<boolean> {
  const row = await q.one(
    `SELECT 1 AS awaiting FROM fanout_queue
     WHERE tenant_id = $1 AND ordering_key = $2 AND ordering_key IS NOT NULL LIMIT 1`,
    [tenantId, orderingKey],
  );
  return row !== undefined;
}

export type IdempotentMessage = Pick<MessageRow, 'id' | 'idempotency_fingerprint' | 'created_at'>;

/** How findByIdempotencyKeys names a tenant's key. */
export function idempotencyKeyId(tenantId: string, key: string): string {
  return `${tenantId}\u0000${key}`;
}

/**
 * The messages already written under these tenants' Idempotency-Keys, by idempotencyKeyId: one
 * statement for a whole group of emits, where a lookup per emit would be a round trip each on
 * PostgreSQL.
 */
export async function findByIdempotencyKeys(
  q: Queryable,
  keys: readonly { tenantId: string; key: string }[],
): Promise<Map<string, IdempotentMessage>> {
  if (keys.length === 0) return new Map();
  const t = jsonRecords(q.dialect, 1, { item_tenant: 'text', item_key: 'text' });
  const rows = await q.all<IdempotentMessage & { tenant_id: string; idempotency_key: string }>(
    `SELECT m.id, m.idempotency_fingerprint, m.created_at, m.tenant_id, m.idempotency_key
     FROM ${t} JOIN messages m ON m.tenant_id = t.item_tenant AND m.idempotency_key = t.item_key`,
    [JSON.stringify(keys.map((k) => ({ item_tenant: k.tenantId, item_key: k.key })))],
  );
  return new Map(
    rows.map((r) => [
      idempotencyKeyId(r.tenant_id, r.idempotency_key),
      { id: r.id, idempotency_fingerprint: r.idempotency_fingerprint, created_at: r.created_at },
    ]),
  );
}

/** An expired idempotency key is released so the same key can name a new message. */
export async function releaseIdempotencyKey(q: Queryable, id: string): Promise<void> {
  await q.run('UPDATE messages SET idempotency_key = NULL WHERE id = $1', [id]);
}

/** Which of these messages exist. */
export async function existingMessageIds(q: Queryable, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await q.all<{ id: string }>(
    `SELECT id FROM messages WHERE id IN (${jsonTextArray(q.dialect, 1)})`,
    [JSON.stringify(ids)],
  );
  return new Set(rows.map((r) => r.id));
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
export async function claimForFanout(q: Queryable, limit: number): Promise<FanoutMessage[]> {
  let rows = await q.all<FanoutMessage>(
    `SELECT ${FANOUT_COLUMNS} FROM fanout_queue
     ORDER BY created_at ${limitParam(1)} ${forUpdate(q.dialect, true)}`,
    [limit],
  );
  if (!rows.some((r) => r.ordering_key !== null)) return rows;
  numberSeqs(rows);
  let waiting = await waitingBehindEarlier(q, rows);
  if (waiting.size > 0) {
    // What they wait for may simply lie outside this batch (written by an API process whose clock is
    // behind): taken in now, in key order, unless another worker holds it, which then makes progress.
    const earlier = await claimEarlierOfKeys(
      q,
      rows.filter((r) => waiting.has(r.id)),
      rows,
      limit,
    );
    if (earlier.length > 0) {
      rows = [...numberSeqs(earlier), ...rows];
      waiting = await waitingBehindEarlier(q, rows);
    }
  }
  return waiting.size === 0 ? rows : rows.filter((r) => !waiting.has(r.id));
}

function numberSeqs(rows: FanoutMessage[]): FanoutMessage[] {
  for (const r of rows) if (r.ordering_seq !== null) r.ordering_seq = Number(r.ordering_seq);
  return rows;
}

/**
 * The messages not yet fanned out that come before `waiting` ones in their keys, outside `batch`,
 * oldest first, locked (rows another worker holds are skipped).
 */
async function claimEarlierOfKeys(
  q: Queryable,
  waiting: readonly FanoutMessage[],
  batch: readonly FanoutMessage[],
  limit: number,
): Promise<FanoutMessage[]> {
  const t = jsonRecords(q.dialect, 1, { item_tenant: 'text', item_key: 'text', item_seq: 'bigint' });
  return q.all<FanoutMessage>(
    `SELECT ${FANOUT_COLUMNS} FROM fanout_queue p
     WHERE p.ordering_key IS NOT NULL
       AND EXISTS (SELECT 1 FROM ${t} WHERE p.tenant_id = t.item_tenant AND p.ordering_key = t.item_key
         AND p.ordering_seq < t.item_seq)
       AND p.message_id NOT IN (${jsonTextArray(q.dialect, 2)})
     ORDER BY p.ordering_seq ${limitParam(3)} ${forUpdate(q.dialect, true, 'p')}`,
    [
      JSON.stringify(
        waiting.map((m) => ({
          item_tenant: m.tenant_id,
          item_key: m.ordering_key,
          item_seq: m.ordering_seq,
        })),
      ),
      JSON.stringify(batch.map((m) => m.id)),
      limit,
    ],
  );
}

export type FanoutMessage = Pick<
  MessageRow,
  'id' | 'tenant_id' | 'event_type' | 'ordering_key' | 'trace_context'
> & {
  ordering_seq: number | null;
  /** The last endpoint id a partial fan-out reached (engine/fanout.ts); null before it starts. */
  cursor: string | null;
};

/** A fanout_queue row as fan-out reads it (FanoutMessage). */
const FANOUT_COLUMNS =
  'message_id AS id, tenant_id, event_type, cursor, ordering_key, ordering_seq, trace_context';

/**
 * Keyed messages that must wait for an earlier message of their key, not yet fanned out and not in
 * this batch (another worker holds it, or the batch ended before it): a line learns of its deliveries
 * in emit order (docs/architecture.md, "Ordering keys"). What follows a waiting message of the same key
 * waits too.
 */
async function waitingBehindEarlier(q: Queryable, batch: readonly FanoutMessage[]): Promise<Set<string>> {
  const keyed = batch.filter((m) => m.ordering_key !== null);
  const t = jsonRecords(q.dialect, 1, {
    item_id: 'text',
    item_tenant: 'text',
    item_key: 'text',
    item_seq: 'bigint',
  });
  const blocked = await q.all<{ id: string }>(
    `SELECT t.item_id AS id FROM ${t}
     WHERE EXISTS (SELECT 1 FROM fanout_queue p
       WHERE p.tenant_id = t.item_tenant AND p.ordering_key = t.item_key AND p.ordering_key IS NOT NULL
         AND p.ordering_seq < t.item_seq AND p.message_id NOT IN (${jsonTextArray(q.dialect, 2)}))`,
    [
      JSON.stringify(
        keyed.map((m) => ({
          item_id: m.id,
          item_tenant: m.tenant_id,
          item_key: m.ordering_key,
          item_seq: m.ordering_seq,
        })),
      ),
      JSON.stringify(batch.map((m) => m.id)),
    ],
  );
  const waiting = new Set(blocked.map((b) => b.id));
  if (waiting.size === 0) return waiting;
  const firstWaiting = new Map<string, number>();
  for (const m of keyed) {
    if (!waiting.has(m.id)) continue;
    const line = `${m.tenant_id}\u0000${m.ordering_key}`;
    firstWaiting.set(line, Math.min(firstWaiting.get(line) ?? Infinity, m.ordering_seq!));
  }
  for (const m of keyed) {
    const first = firstWaiting.get(`${m.tenant_id}\u0000${m.ordering_key}`);
    if (first !== undefined && m.ordering_seq! > first) waiting.add(m.id);
  }
  return waiting;
}

/** Takes fanned-out messages off the fan-out queue, and records how far a partly fanned-out one has come. */
export async function advanceFanout(
  q: Queryable,
  done: readonly string[],
  partial: { id: string; cursor: string } | null,
): Promise<void> {
  if (done.length > 0) {
    // = ANY(ARRAY(…)) on PostgreSQL, as the queue's fences (store/db.ts, notIndexed). The table is small,
    // so its plan may read it whole rather than by key: dead rows included, until the workers' vacuum
    // (docs/scaling.md, "Vacuum").
    const ids = jsonTextArray(q.dialect, 1);
    const which = q.dialect === 'postgres' ? `= ANY(ARRAY(${ids}))` : `IN (${ids})`;
    await q.run(`DELETE FROM fanout_queue WHERE message_id ${which}`, [JSON.stringify(done)]);
  }
  if (partial) {
    await q.run('UPDATE fanout_queue SET cursor = $2 WHERE message_id = $1', [partial.id, partial.cursor]);
  }
}

/** Whether any message awaits fan-out: one probe of the fan-out queue, outside any transaction. */
export async function anyAwaitingFanout(q: Queryable): Promise<boolean> {
  const row = await q.one('SELECT 1 AS awaiting FROM fanout_queue LIMIT 1');
  return row !== undefined;
}

export async function countAwaitingFanout(q: Queryable): Promise<number> {
  const row = await q.one<{ n: number }>('SELECT COUNT(*) AS n FROM fanout_queue');
  return Number(row?.n ?? 0);
}
