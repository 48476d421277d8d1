import {
  blobType,
  blobFromHex,
  jsonRecords,
  limitParam,
  type Dialect,
  type Queryable,
  type SqlValue,
} from '../db.js';

export const name = 'ordering and idempotency keys stored as keyed hashes; refused attempts counted';

export function statements(dialect: Dialect): string[] {
  // The key columns keep their names and now hold keyed hashes (convert, below); the ordering key
  // itself is kept sealed beside its message, for operators (engine/sealing.ts, storedKeys).
  return [
    `ALTER TABLE messages ADD COLUMN ordering_key_sealed ${blobType(dialect)}`,
    // Failed attempts that were refused before reaching the subscriber, by reason (net/refusal-reasons.ts):
    // the console's endpoint health shows them (docs/operators.md, "Refused connections").
    ...['refused_ssrf', 'refused_tls', 'refused_proxy'].map(
      (c) => `ALTER TABLE delivery_stats ADD COLUMN ${c} INTEGER NOT NULL DEFAULT 0`,
    ),
  ];
}

/** What the migration is handed to convert rows (engine/sealing.ts, keyConverter). */
export interface KeyConverter {
  /** The keyed hash emits store (crypto/envelope.ts, keyHash). */
  keyHash(kind: 'ordering' | 'idempotency', tenantId: string, value: string): string;
  /** A message's ordering key sealed, bound to the message. */
  sealOrderingKey(messageId: string, value: string): Buffer;
}

export interface ConvertContext {
  /** Null when the caller has no encryption key: then there must be nothing to convert. */
  keys: KeyConverter | null;
  onProgress: (message: string) => void;
}

/** Rows rewritten per statement: one read and one update of at most this many rows. */
export const BATCH = 1_000;
/** A progress line every this many rows of a table. */
const PROGRESS_EVERY = 50_000;

interface Table {
  name: 'messages' | 'deliveries' | 'dead_letters';
  /** The columns holding keys, and the kind of key each holds. */
  columns: readonly { column: string; kind: 'ordering' | 'idempotency' }[];
  /** Whether the ordering key is also kept sealed in the row (messages). */
  sealed: boolean;
}

const TABLES: readonly Table[] = [
  {
    name: 'messages',
    columns: [
      { column: 'ordering_key', kind: 'ordering' },
      { column: 'idempotency_key', kind: 'idempotency' },
    ],
    sealed: true,
  },
  { name: 'deliveries', columns: [{ column: 'ordering_key', kind: 'ordering' }], sealed: false },
  { name: 'dead_letters', columns: [{ column: 'ordering_key', kind: 'ordering' }], sealed: false },
];

/**
 * Replaces every ordering key and Idempotency-Key written in clear by its keyed hash, the one emits
 * now write, and keeps messages' ordering keys sealed (docs/security.md, "What is stored"). HMAC and
 * AES-GCM need the key, which SQL does not have, so the rows are read and written back in batches of
 * BATCH in primary-key order, inside the migration's transaction (CHANGELOG.md, the upgrade note of
 * migration 014). Each row is rewritten once, as the walk passes it; the same tenant and key give the
 * same hash in every table, so lines and idempotency go on across the upgrade. Answers how many rows
 * it rewrote.
 */
export async function convert(tx: Queryable, ctx: ConvertContext): Promise<number> {
  let rows = 0;
  for (const table of TABLES) rows += await convertTable(tx, table, ctx);
  return rows;
}

async function convertTable(tx: Queryable, table: Table, ctx: ConvertContext): Promise<number> {
  const keyed = table.columns.map((c) => `${c.column} IS NOT NULL`).join(' OR ');
  const select = `SELECT id, tenant_id, ${table.columns.map((c) => c.column).join(', ')} FROM ${table.name}
    WHERE id > $1 AND (${keyed}) ORDER BY id ${limitParam(2)}`;
  const records = jsonRecords(tx.dialect, 1, {
    item_id: 'text',
    ...Object.fromEntries(table.columns.map((c) => [`item_${c.column}`, 'text' as const])),
    ...(table.sealed ? { item_sealed: 'text' as const } : {}),
  });
  const sets = table.columns.map((c) => `${c.column} = t.item_${c.column}`);
  if (table.sealed) sets.push(`ordering_key_sealed = ${blobFromHex(tx.dialect, 't.item_sealed')}`);
  const update = `UPDATE ${table.name} SET ${sets.join(', ')} FROM ${records} WHERE ${table.name}.id = t.item_id`;
  let after = '';
  let done = 0;
  let reported = 0;
  const report = () => {
    ctx.onProgress(`  ${table.name}: ${done} rows with keys hashed`);
    reported = done;
  };
  for (;;) {
    const rows = await tx.all<Record<string, string | null>>(select, [after, BATCH] as SqlValue[]);
    if (rows.length === 0) break;
    if (!ctx.keys) {
      throw new Error(
        `migration 14 must hash the ordering and Idempotency-Keys of ${table.name}, and needs the encryption key for it`,
      );
    }
    const keys = ctx.keys;
    const items = rows.map((row) => {
      const item: Record<string, string | null> = { item_id: row.id! };
      for (const { column, kind } of table.columns) {
        const value = row[column] ?? null;
        item[`item_${column}`] = value === null ? null : keys.keyHash(kind, row.tenant_id!, value);
      }
      const orderingKey = row.ordering_key ?? null;
      if (table.sealed) {
        item.item_sealed =
          orderingKey === null ? null : keys.sealOrderingKey(row.id!, orderingKey).toString('hex');
      }
      return item;
    });
    await tx.run(update, [JSON.stringify(items)]);
    after = rows[rows.length - 1]!.id!;
    done += rows.length;
    if (done - reported >= PROGRESS_EVERY) report();
  }
  if (done > reported) report();
  return done;
}
