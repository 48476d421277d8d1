import type { Dialect } from '../db.js';

export const name = 'queue depth samples';

// One row per minute: the backlog over time that the console charts. Workers overwrite the same
// minute's row, so any number of them can sample.
export function statements(_dialect: Dialect): string[] {
  return [
    `CREATE TABLE queue_samples (
      bucket BIGINT PRIMARY KEY,
      due INTEGER NOT NULL,
      scheduled INTEGER NOT NULL,
      delivering INTEGER NOT NULL,
      dead_letters INTEGER NOT NULL
    )`,
  ];
}
