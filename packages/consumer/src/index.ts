/**
 * `@hookline/consumer`: sign and verify hookline webhook deliveries (the Standard Webhooks schemes with
 * `hook-` headers: `v1`, HMAC-SHA256 with a `whsec_` secret, and `v1a`, Ed25519 with a `whsk_`/`whpk_`
 * key pair), plus a reference request handler. The hookline server signs with this same code.
 *
 * @packageDocumentation
 */

/** Thrown when a delivery (or a secret) fails verification; carries a stable `reason`. */
export { WebhookVerificationError } from './errors.js';
/** The stable `reason` strings of {@link WebhookVerificationError}. */
export type { WebhookVerificationReason } from './errors.js';

/** Generate a `whsec_` secret (the `v1` scheme), and decode one into its HMAC key. */
export { generateSecret, decodeSecret } from './secret.js';

/** Produce one `v1,` signature, or the whole `hook-signature` header for several keys (v1 and v1a). */
export { sign, signatureHeader } from './signature.js';
/** Inputs of {@link sign} and {@link signatureHeader}, and the scheme names `v1` and `v1a`. */
export type { SignInput, SignatureHeaderInput, SignatureScheme } from './signature.js';
/** The unparsed body, as a string or bytes. */
export type { RawBody } from './signed-content.js';

/** The `v1a` scheme (Ed25519): key pairs, key decoding, and one `v1a,` signature. */
export {
  generateEd25519KeyPair,
  derivePublicKey,
  decodePublicKey,
  decodePrivateKey,
  signV1a,
} from './ed25519.js';
/** A `whsk_`/`whpk_` key pair, and the input of {@link signV1a}. */
export type { Ed25519KeyPair, SignV1aInput } from './ed25519.js';

/** Verify a delivery's headers, timestamp and signature, and parse its `{ type, data }`. */
export { verifyWebhook, DEFAULT_TOLERANCE_SECONDS } from './verify.js';
/** Input and result of {@link verifyWebhook}; `VerificationKeys` is its `secret` or `publicKey`. */
export type { VerifyWebhookInput, VerificationKeys, VerifyOptions, WebhookEvent } from './verify.js';
/** Header containers {@link verifyWebhook} accepts: Node-style objects or WHATWG `Headers`. */
export type { WebhookHeaders, HeaderRecord, HeadersLike } from './headers.js';

/** Reference `(req, res)` handler: verify, deduplicate by hook-id, call your code, answer. */
export { createWebhookHandler } from './handler.js';
/** Options of {@link createWebhookHandler} and the non-verification error codes it answers with. */
export type { WebhookHandlerOptions, WebhookHandlerErrorCode } from './handler.js';

/** Pluggable hook-id deduplication, and the in-memory default. */
export { MemoryDedupeStore } from './dedupe-store.js';
/** The store contract, a claim's outcome, and the in-memory store's options. */
export type { DedupeStore, ClaimResult, MemoryDedupeStoreOptions } from './dedupe-store.js';
