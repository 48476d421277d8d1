// Every operator action is recorded: who (key id and role), what, when, on what (docs/operators.md,
// "The audit log"). An entry is written in the transaction of the action it records, so an action
// never happens unrecorded and a recorded action never fails to happen.
import { newId } from '../ids.js';
import { isoTime } from '../pagination.js';
import type { Role } from '../store/api-keys.js';
import { appendAudit, type AuditEntry } from '../store/audit-log.js';
import type { Queryable } from '../store/db.js';

/** Who acted: an API key, or the `hookline` command run by someone with access to the configuration. */
export type Actor = { keyId: string | null; role: Role } | { keyId: null; role: 'cli' };

export const CLI_ACTOR: Actor = { keyId: null, role: 'cli' };

/**
 * A handle on the database outside any transaction (a Db) has `transaction`; the `tx` a transaction
 * hands its function does not. Refusing the former keeps an entry from being written beside its action.
 */
function assertInTransaction(tx: Queryable): void {
  if ('transaction' in tx) {
    throw new Error('audit entries are written inside the transaction of the action they record');
  }
}

/** Records an action inside its transaction `tx`; answers the entry's id. */
export async function audit(
  tx: Queryable,
  actor: Actor,
  action: string,
  target: string | null,
  details: Record<string, unknown>,
  now: number,
): Promise<string> {
  assertInTransaction(tx);
  const id = newId('audit', now);
  await appendAudit(tx, {
    id,
    actor_key_id: actor.keyId,
    actor_role: actor.role,
    action,
    target,
    details: JSON.stringify(details),
    created_at: now,
  });
  return id;
}

export function auditView(entry: AuditEntry) {
  return {
    id: entry.id,
    actor_key_id: entry.actor_key_id,
    actor_role: entry.actor_role,
    action: entry.action,
    target: entry.target,
    details: JSON.parse(entry.details) as Record<string, unknown>,
    created_at: isoTime(entry.created_at),
  };
}
