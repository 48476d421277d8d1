/**
 * `@hookline/consumer`: sign and verify hookline webhook deliveries (the Standard Webhooks scheme with
 * `hook-` headers), plus a reference request handler. The hookline server signs with this same code.
 *
 * @packageDocumentation
 */

/** Thrown when a delivery (or a secret) fails verification; carries a stable `reason`. */
export { WebhookVerificationError } from './errors.js';
/** The stable `reason` strings of {@link WebhookVerificationError}. */
export type { WebhookVerificationReason } from './errors.js';

/** Generate a `whsec_` secret, and decode one into its HMAC key. */
export { generateSecret, decodeSecret } from './secret.js';

/** Produce one `v1,` signature, or the whole `hook-signature` header for several secrets. */
export { sign, signatureHeader } from './signature.js';
/** Inputs of {@link sign} and {@link signatureHeader}; `RawBody` is the unparsed body. */
export type { SignInput, SignatureHeaderInput, RawBody } from './signature.js';

/** Verify a delivery's headers, timestamp and signature, and parse its `{ type, data }`. */
export { verifyWebhook, DEFAULT_TOLERANCE_SECONDS } from './verify.js';
/** Input and result of {@link verifyWebhook}. */
export type { VerifyWebhookInput, WebhookEvent } from './verify.js';
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
