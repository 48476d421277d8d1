import type { Dialect } from '../db.js';

export const name = 'answer times of endpoint queues';

export function statements(dialect: Dialect): string[] {
  // What the adaptive limit reads to tell overload from errors (docs/architecture.md, "Adaptive
  // concurrency"): the endpoint's recent answer time (a moving average over about the last ten
  // answers) and its floor (the least answer time seen, forgotten slowly), both in milliseconds, all
  // workers together. Null until the endpoint has answered. And since when the recent time has been
  // above what the floor allows (a queue at the subscriber), null while it is not.
  const real = dialect === 'postgres' ? 'DOUBLE PRECISION' : 'REAL';
  return [
    `ALTER TABLE endpoint_queues ADD COLUMN answer_ms_recent ${real}`,
    `ALTER TABLE endpoint_queues ADD COLUMN answer_ms_floor ${real}`,
    'ALTER TABLE endpoint_queues ADD COLUMN answer_slow_since BIGINT',
  ];
}
