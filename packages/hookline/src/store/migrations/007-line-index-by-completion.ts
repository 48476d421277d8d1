import type { Dialect } from '../db.js';

export const name = 'ordering lines indexed by completion, not by status';

export function statements(_dialect: Dialect): string[] {
  // deliveries_open_by_line held a line's rows while their status was pending, delivering or held, so
  // every claim (pending to delivering) and every promotion (held to pending) of a keyed delivery
  // took its entry out and put it back. Every finished delivery has a completion time and no unfinished
  // one does, so the same rows are those without one, and only the end of a delivery touches the index
  // (docs/architecture.md, "Ordering keys").
  return [
    // Finished rows written before completion times were kept for every end, should there be any.
    `UPDATE deliveries SET completed_at = updated_at
       WHERE completed_at IS NULL AND status IN ('succeeded', 'dead', 'cancelled')`,
    'DROP INDEX deliveries_open_by_line',
    `CREATE INDEX deliveries_open_by_line ON deliveries (endpoint_id, ordering_key, ordering_seq)
       WHERE ordering_key IS NOT NULL AND completed_at IS NULL`,
  ];
}
