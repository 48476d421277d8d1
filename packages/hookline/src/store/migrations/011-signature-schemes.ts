import type { Dialect } from '../db.js';

export const name = 'signature schemes of endpoints';

export function statements(_dialect: Dialect): string[] {
  // v1 (HMAC-SHA256) or v1a (Ed25519). A v1a endpoint's private key (whsk_…) is stored sealed where a
  // v1 endpoint's secret is (`secret`, `previous_secret`); its public key is public, kept in clear
  // for the endpoint object (docs/contract.md §4.1, §5).
  return [
    "ALTER TABLE endpoints ADD COLUMN signature_scheme TEXT NOT NULL DEFAULT 'v1'",
    'ALTER TABLE endpoints ADD COLUMN public_key TEXT',
  ];
}
