import type { Dialect } from '../db.js';

export const name = 'delivery engine: endpoint queues';

// Migrations are frozen history: these literals are the INITIAL_* constants of store/endpoint-queues.ts
// as they were when this ran.
const INITIAL_CONCURRENCY = 8;
const INITIAL_SLOW_START_THRESHOLD = 1_000_000;

// One small row per endpoint carries what claims need to know about it (docs/architecture.md):
// whether it has due work, how many attempts are in flight across all workers, its adaptive limit
// and any pause. `ready_at` is derived from them: when the endpoint can next be claimed from, or NULL
// while it is inactive, empty or at its limit. Claims read only the ready rows, in `ready_at` order,
// so saturated, paused and disabled endpoints cost them nothing, however large their backlog.
export function statements(dialect: Dialect): string[] {
  const later = (a: string, b: string) => `CASE WHEN ${b} > ${a} THEN ${b} ELSE ${a} END`;
  return [
    `CREATE TABLE endpoint_queues (
      endpoint_id TEXT PRIMARY KEY REFERENCES endpoints (id),
      active INTEGER NOT NULL DEFAULT 1,
      queued INTEGER NOT NULL DEFAULT 0,
      next_due_at BIGINT,
      in_flight INTEGER NOT NULL DEFAULT 0,
      concurrency_limit INTEGER NOT NULL DEFAULT ${INITIAL_CONCURRENCY},
      concurrency_credit INTEGER NOT NULL DEFAULT 0,
      slow_start_threshold INTEGER NOT NULL DEFAULT ${INITIAL_SLOW_START_THRESHOLD},
      last_decrease_at BIGINT,
      paused_until BIGINT,
      ready_at BIGINT GENERATED ALWAYS AS (
        CASE WHEN active = 1 AND next_due_at IS NOT NULL AND in_flight < concurrency_limit
          THEN ${later('next_due_at', 'paused_until')} END
      ) STORED
    )`,
    `CREATE INDEX endpoint_queues_ready ON endpoint_queues (ready_at) WHERE ready_at IS NOT NULL`,
    // Parking is gone: an open circuit pauses the endpoint's queue instead of moving its rows.
    `UPDATE deliveries SET status = 'pending' WHERE status = 'parked'`,
    `INSERT INTO endpoint_queues (endpoint_id, active, queued, next_due_at, paused_until)
     SELECT e.id, CASE WHEN e.status = 'active' THEN 1 ELSE 0 END,
       (SELECT COUNT(*) FROM deliveries d WHERE d.endpoint_id = e.id AND d.status = 'pending'),
       (SELECT MIN(d.next_attempt_at) FROM deliveries d WHERE d.endpoint_id = e.id AND d.status = 'pending'),
       e.circuit_open_until
     FROM endpoints e`,
    `UPDATE endpoint_queues SET in_flight =
       (SELECT COUNT(*) FROM deliveries d WHERE d.endpoint_id = endpoint_queues.endpoint_id AND d.status = 'delivering')`,
    // Each endpoint's waiting deliveries in due order: what a claim reads, batch by batch.
    `CREATE INDEX deliveries_pending_by_endpoint ON deliveries (endpoint_id, next_attempt_at)
       WHERE status = 'pending'`,
    'DROP INDEX deliveries_due',
    // Every status change rewrote this index; the partial ones above and below serve its readers.
    'DROP INDEX deliveries_by_endpoint',
    // Retention keeps the messages dead letters can replay; it asks for each message it prunes.
    `CREATE INDEX dead_letters_by_message ON dead_letters (message_id)`,
    // How far a message's fan-out has come: the last endpoint id done, so a message with thousands of
    // subscribers is fanned out in bounded transactions.
    'ALTER TABLE messages ADD COLUMN fanout_cursor TEXT',
    ...(dialect === 'postgres'
      ? [
          // A foreign-key check is a trigger and a locking lookup per inserted row on PostgreSQL: the
          // larger part of a fan-out's cost. Deliveries are only made from rows that exist, endpoints
          // are never deleted (only marked), and retention keeps every message a delivery refers to.
          'ALTER TABLE deliveries DROP CONSTRAINT deliveries_message_id_fkey',
          'ALTER TABLE deliveries DROP CONSTRAINT deliveries_endpoint_id_fkey',
          'ANALYZE endpoint_queues',
        ]
      : []),
  ];
}
