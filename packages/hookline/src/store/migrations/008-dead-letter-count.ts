import type { Dialect } from '../db.js';

export const name = 'dead letters counted, not scanned';

export function statements(_dialect: Dialect): string[] {
  // /metrics, the console's overview and the queue sampler read how many dead letters there are.
  // Dead letters are kept (operators replay them; nothing deletes them), so COUNT(*) read a table
  // that only grows on every scrape and refresh. The count is kept here instead, moved by the
  // transaction that writes the dead letters (store/dead-letters.ts; docs/architecture.md, "Tables").
  return [
    'CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)',
    "INSERT INTO counters (name, value) SELECT 'dead_letters', COUNT(*) FROM dead_letters",
  ];
}
