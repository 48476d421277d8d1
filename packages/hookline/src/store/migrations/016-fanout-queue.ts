import type { Dialect } from '../db.js';

export const name = 'fan-out queue';

export function statements(_dialect: Dialect): string[] {
  // A message is written once and never changed: what fan-out still has to do lives in a row of its
  // own, deleted when the message is fanned out (docs/architecture.md, "Fan-out"). Marking the
  // message itself rewrote the whole row, payload included, and a new entry in each of its indexes,
  // for every message (PostgreSQL has no in-place update). The row carries what fan-out reads, so
  // fan-out never reads the message: its tenant, type, emit time and order, how far a partial
  // fan-out has come (`cursor`, the last endpoint done) and the emit's trace context.
  return [
    `CREATE TABLE fanout_queue (
      message_id TEXT PRIMARY KEY,
      tenant_id TEXT NOT NULL,
      event_type TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      cursor TEXT,
      ordering_key TEXT,
      ordering_seq BIGINT,
      trace_context TEXT
    )`,
    'CREATE INDEX fanout_queue_by_age ON fanout_queue (created_at)',
    // Fan-out takes a keyed message only after every earlier one of its key.
    `CREATE INDEX fanout_queue_by_key ON fanout_queue (tenant_id, ordering_key, ordering_seq)
       WHERE ordering_key IS NOT NULL`,
    `INSERT INTO fanout_queue (message_id, tenant_id, event_type, created_at, cursor, ordering_key, ordering_seq,
       trace_context)
     SELECT id, tenant_id, event_type, created_at, fanout_cursor, ordering_key, ordering_seq, trace_context
     FROM messages WHERE fanned_out_at IS NULL`,
    'DROP INDEX messages_awaiting_fanout',
    'DROP INDEX messages_keyed_awaiting_fanout',
    'ALTER TABLE messages DROP COLUMN fanned_out_at',
    'ALTER TABLE messages DROP COLUMN fanout_cursor',
  ];
}
