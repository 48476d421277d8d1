import { limitParam, type Queryable } from './db.js';

export interface AuditEntry {
  id: string;
  actor_key_id: string | null;
  actor_role: string;
  action: string;
  target: string | null;
  details: string;
  created_at: number;
}

export async function appendAudit(q: Queryable, entry: AuditEntry): Promise<void> {
  await q.run(
    `INSERT INTO audit_log (id, actor_key_id, actor_role, action, target, details, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [
      entry.id,
      entry.actor_key_id,
      entry.actor_role,
      entry.action,
      entry.target,
      entry.details,
      entry.created_at,
    ],
  );
}

export async function listAudit(q: Queryable, limit: number, before: string | null): Promise<AuditEntry[]> {
  return q.all<AuditEntry>(
    `SELECT * FROM audit_log WHERE ($1 = '' OR id < $1) ORDER BY id DESC ${limitParam(2)}`,
    [before ?? '', limit],
  );
}
