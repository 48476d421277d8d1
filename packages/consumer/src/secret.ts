import { randomBytes } from 'node:crypto';
import { WebhookVerificationError } from './errors.js';

const PREFIX = 'whsec_';

// Standard base64, padding optional: Buffer.from(…, 'base64') silently skips junk characters, so
// without this check a typo in a secret would yield a different key instead of an error.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

/** A fresh signing secret: `whsec_` + base64 of 32 random bytes (the Standard Webhooks format). */
export function generateSecret(): string {
  return PREFIX + randomBytes(32).toString('base64');
}

/**
 * The HMAC key behind a secret. The `whsec_` prefix is optional so that secrets copied from other
 * Standard Webhooks senders still work.
 *
 * Throws `WebhookVerificationError` with reason `invalid_secret` (on both the sending and the receiving
 * side) so callers have one error type to handle; a bad secret is a configuration error, not a bad
 * delivery, and the reference handler reports it at construction time.
 */
export function decodeSecret(secret: string): Buffer {
  if (typeof secret !== 'string') {
    throw new WebhookVerificationError('invalid_secret', 'The webhook secret must be a string');
  }
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  if (encoded.length === 0 || !BASE64.test(encoded)) {
    throw new WebhookVerificationError(
      'invalid_secret',
      'The webhook secret must be "whsec_" followed by non-empty base64',
    );
  }
  return Buffer.from(encoded, 'base64');
}
