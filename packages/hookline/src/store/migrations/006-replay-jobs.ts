import { blobType, type Dialect } from '../db.js';

export const name = 'bulk-replay jobs and sealed subscriber answers';

export function statements(dialect: Dialect): string[] {
  const blob = blobType(dialect);
  const position = dialect === 'postgres' ? 'strpos' : 'instr';
  // Subscribers echo payloads back in their answers: the answer moves to a sealed column and
  // last_error keeps only hookline's own words (engine/last-error.ts). A migration has no key to
  // seal what is already stored, so those answers are cut off, leaving `HTTP <status>`.
  const redact = (table: string) =>
    `UPDATE ${table} SET last_error = substr(last_error, 1, ${position}(last_error, ': ') - 1)
     WHERE last_error LIKE 'HTTP %: %'`;
  return [
    `ALTER TABLE deliveries ADD COLUMN last_response ${blob}`,
    `ALTER TABLE dead_letters ADD COLUMN last_response ${blob}`,
    redact('deliveries'),
    redact('dead_letters'),
    // A bulk replay (docs/contract.md §4.3) runs as a job the workers take turns on
    // (admin/replay-jobs.ts): its filter, its extent (`last_id`, the newest dead letter it covers), how
    // far it got (`cursor_id`, the last dead letter handled) and who holds it (a lease).
    `CREATE TABLE replay_jobs (
      id TEXT PRIMARY KEY,
      status TEXT NOT NULL,
      tenant_id TEXT,
      endpoint_id TEXT,
      since BIGINT,
      until BIGINT,
      last_id TEXT,
      cursor_id TEXT,
      count INTEGER NOT NULL,
      replayed INTEGER NOT NULL DEFAULT 0,
      skipped INTEGER NOT NULL DEFAULT 0,
      failed INTEGER NOT NULL DEFAULT 0,
      error TEXT,
      lease_owner TEXT,
      lease_expires_at BIGINT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      finished_at BIGINT
    )`,
    `CREATE INDEX replay_jobs_running ON replay_jobs (created_at) WHERE status = 'running'`,
  ];
}
