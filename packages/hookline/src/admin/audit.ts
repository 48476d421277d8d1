// Every operator action is recorded: who (key id and role), what, when, on what.
import type { Principal } from '../keys/api-keys.js';
import { newId } from '../ids.js';
import { isoTime } from '../pagination.js';
import { appendAudit, type AuditEntry } from '../store/audit-log.js';
import type { Queryable } from '../store/db.js';

/** Who acted: an API key, or the `hookline` command run by someone with access to the configuration. */
export type Actor = Pick<Principal, 'keyId' | 'role'> | { keyId: null; role: 'cli' };

export const CLI_ACTOR: Actor = { keyId: null, role: 'cli' };

export async function audit(
  q: Queryable,
  actor: Actor,
  action: string,
  target: string | null,
  details: Record<string, unknown>,
  now: number,
): Promise<void> {
  await appendAudit(q, {
    id: newId('audit', now),
    actor_key_id: actor.keyId,
    actor_role: actor.role,
    action,
    target,
    details: JSON.stringify(details),
    created_at: now,
  });
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
