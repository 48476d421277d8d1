import { randomBytes } from 'node:crypto';
import { decodeBase64 } from './base64.js';
import { WebhookVerificationError } from './errors.js';

const PREFIX = 'whsec_';

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
  const key = decodeBase64(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret);
  if (key === undefined) {
    throw new WebhookVerificationError(
      'invalid_secret',
      'The webhook secret must be "whsec_" followed by non-empty base64',
    );
  }
  return key;
}
