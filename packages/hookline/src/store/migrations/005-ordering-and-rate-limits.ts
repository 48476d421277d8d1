import type { Dialect } from '../db.js';

export const name = 'ordered delivery per key and endpoint rate limits';

// docs/architecture.md, "Ordering keys" and "Rate limits".
export function statements(dialect: Dialect): string[] {
  const later = (a: string, b: string) => `CASE WHEN ${b} > ${a} THEN ${b} ELSE ${a} END`;
  // The queue becomes claimable at the latest of: its next due delivery, a pause, and the rate
  // limit's next free slot (`throttled_until`).
  const readyAt = `CASE WHEN active = 1 AND next_due_at IS NOT NULL AND in_flight < concurrency_limit
    THEN ${later(later('next_due_at', 'paused_until'), 'throttled_until')} END`;
  const queueColumns = `
      endpoint_id TEXT PRIMARY KEY REFERENCES endpoints (id),
      active INTEGER NOT NULL DEFAULT 1,
      queued INTEGER NOT NULL DEFAULT 0,
      next_due_at BIGINT,
      in_flight INTEGER NOT NULL DEFAULT 0,
      concurrency_limit INTEGER NOT NULL DEFAULT 8,
      concurrency_credit INTEGER NOT NULL DEFAULT 0,
      slow_start_threshold INTEGER NOT NULL DEFAULT 1000000,
      last_decrease_at BIGINT,
      paused_until BIGINT,
      rate_interval_us BIGINT,
      rate_tolerance_us BIGINT,
      rate_tat_us BIGINT,
      throttled_until BIGINT,
      ready_at BIGINT GENERATED ALWAYS AS (${readyAt}) STORED`;
  const copied = `endpoint_id, active, queued, next_due_at, in_flight, concurrency_limit, concurrency_credit,
    slow_start_threshold, last_decrease_at, paused_until`;
  return [
    'ALTER TABLE messages ADD COLUMN ordering_key TEXT',
    // Emit order of keyed messages, from one counter for the whole database (store/messages.ts).
    'ALTER TABLE messages ADD COLUMN ordering_seq BIGINT',
    'ALTER TABLE deliveries ADD COLUMN ordering_key TEXT',
    'ALTER TABLE deliveries ADD COLUMN ordering_seq BIGINT',
    'ALTER TABLE dead_letters ADD COLUMN ordering_key TEXT',
    'ALTER TABLE endpoints ADD COLUMN rate_limit INTEGER',
    // A key's line at one endpoint: its unfinished deliveries in emit order. Unkeyed rows are not in it.
    `CREATE INDEX deliveries_open_by_line ON deliveries (endpoint_id, ordering_key, ordering_seq)
       WHERE ordering_key IS NOT NULL AND status IN ('pending', 'delivering', 'held')`,
    // Fan-out takes a keyed message only after every earlier one of its key.
    `CREATE INDEX messages_keyed_awaiting_fanout ON messages (tenant_id, ordering_key, ordering_seq)
       WHERE fanned_out_at IS NULL AND ordering_key IS NOT NULL`,
    ...(dialect === 'postgres'
      ? [
          'CREATE SEQUENCE ordering_seq',
          `ALTER TABLE endpoint_queues ADD COLUMN rate_interval_us BIGINT, ADD COLUMN rate_tolerance_us BIGINT,
             ADD COLUMN rate_tat_us BIGINT, ADD COLUMN throttled_until BIGINT`,
          'ALTER TABLE endpoint_queues DROP COLUMN ready_at',
          `ALTER TABLE endpoint_queues ADD COLUMN ready_at BIGINT GENERATED ALWAYS AS (${readyAt}) STORED`,
        ]
      : [
          `CREATE TABLE sequences (name TEXT PRIMARY KEY, value INTEGER NOT NULL)`,
          `INSERT INTO sequences (name, value) VALUES ('ordering_seq', 0)`,
          // SQLite cannot add a stored generated column to a table: the table is rebuilt (one small
          // row per endpoint).
          `CREATE TABLE endpoint_queues_new (${queueColumns})`,
          `INSERT INTO endpoint_queues_new (${copied}) SELECT ${copied} FROM endpoint_queues`,
          'DROP TABLE endpoint_queues',
          'ALTER TABLE endpoint_queues_new RENAME TO endpoint_queues',
        ]),
    // Dropping the old column (PostgreSQL) or table (SQLite) dropped its index.
    'CREATE INDEX endpoint_queues_ready ON endpoint_queues (ready_at) WHERE ready_at IS NOT NULL',
  ];
}
