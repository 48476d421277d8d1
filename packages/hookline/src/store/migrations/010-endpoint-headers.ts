import { blobType, type Dialect } from '../db.js';

export const name = 'custom headers of endpoints';

export function statements(dialect: Dialect): string[] {
  // A JSON object of extra request headers, sealed like the signing secret (they often carry a
  // subscriber's token; endpoints/custom-headers.ts). NULL: none.
  return [`ALTER TABLE endpoints ADD COLUMN headers ${blobType(dialect)}`];
}
