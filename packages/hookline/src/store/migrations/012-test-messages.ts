import type { Dialect } from '../db.js';

export const name = 'test messages';

export function statements(_dialect: Dialect): string[] {
  // 1 for a message made by POST /v1/webhooks/:id/test: delivered to its one endpoint like any other,
  // but never dead-lettered when its attempts run out (docs/operators.md, "Test events").
  return ['ALTER TABLE messages ADD COLUMN is_test INTEGER NOT NULL DEFAULT 0'];
}
