import type { Dialect } from '../db.js';

export const name = 'dead letters awaiting an operator, counted';

export function statements(_dialect: Dialect): string[] {
  // A dead letter awaits an operator until a replay of it is queued, and again when that replay dies
  // or is cancelled. The console's overview and badge, /metrics and the endpoint health show this,
  // not every record stored: a replayed dead letter is handled (docs/operators.md, "The console").
  // The flag is kept on the row, so the hourly recount stays exact once replay deliveries are pruned;
  // the counter beside `dead_letters` moves with it (store/dead-letters.ts).
  const replayEnded = `EXISTS (SELECT 1 FROM deliveries r WHERE r.id = dead_letters.replay_delivery_id
    AND r.status IN ('dead', 'cancelled'))`;
  // A replay delivery pruned already: a replay that died moved died_at past replayed_at.
  const replayPrunedAfterDying = `NOT EXISTS (SELECT 1 FROM deliveries r WHERE r.id = dead_letters.replay_delivery_id)
    AND died_at > replayed_at`;
  return [
    'ALTER TABLE dead_letters ADD COLUMN awaiting INTEGER NOT NULL DEFAULT 1',
    `UPDATE dead_letters SET awaiting = 0
     WHERE replay_delivery_id IS NOT NULL AND NOT (${replayEnded}) AND NOT (${replayPrunedAfterDying})`,
    // Per-endpoint counts for the console's endpoint health, and the recount: only awaiting rows.
    'CREATE INDEX dead_letters_awaiting ON dead_letters (tenant_id, endpoint_id) WHERE awaiting = 1',
    "INSERT INTO counters (name, value) SELECT 'dead_letters_awaiting', COUNT(*) FROM dead_letters WHERE awaiting = 1",
  ];
}
