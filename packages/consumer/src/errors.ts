/**
 * Why a delivery was rejected. The strings are part of the public contract: the reference handler
 * sends them as `error.code`, and callers branch on them, so they never change meaning.
 */
export type WebhookVerificationReason =
  | 'missing_header'
  | 'invalid_timestamp'
  | 'timestamp_too_old'
  | 'timestamp_too_new'
  | 'invalid_signature'
  | 'invalid_payload'
  | 'invalid_secret'
  | 'invalid_public_key'
  | 'invalid_private_key';

/**
 * Thrown by {@link verifyWebhook} (and for a malformed secret or key, by {@link decodeSecret},
 * {@link decodePublicKey} and {@link decodePrivateKey}). `reason` is
 * stable and machine-readable; `message` is for humans and may be reworded.
 */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  readonly reason: WebhookVerificationReason;

  constructor(reason: WebhookVerificationReason, message: string) {
    super(message);
    this.reason = reason;
  }
}
