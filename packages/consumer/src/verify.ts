import type { KeyObject } from 'node:crypto';
import { decodePublicKey, verifyEd25519 } from './ed25519.js';
import { WebhookVerificationError } from './errors.js';
import { readHeader, type WebhookHeaders } from './headers.js';
import { decodeSecret } from './secret.js';
import { signedContent, type RawBody } from './signed-content.js';
import {
  computeSignature,
  parseSignatureHeader,
  signaturesEqual,
  type SignatureScheme,
} from './signature.js';

/** The spec's replay window: deliveries older (or further in the future) than 5 minutes are rejected. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * What to verify with: exactly one of `secret` (the `v1` scheme, HMAC-SHA256) or `publicKey` (the `v1a`
 * scheme, Ed25519); both or neither throw a TypeError. Both are optional in the type so that code
 * written when `secret` was the only key (spreading partial inputs, say) keeps compiling.
 */
export interface VerificationKeys {
  /** The endpoint's `whsec_…` secret, or several while you rotate your own copy. */
  secret?: string | readonly string[];
  /** The endpoint's `whpk_…` public key (its `public_key` field), or several while you rotate. */
  publicKey?: string | readonly string[];
}

export interface VerifyOptions {
  /** Request headers: Node-style object (any case) or a WHATWG `Headers`. */
  headers: WebhookHeaders;
  /** The raw body, exactly as received. A parsed JSON object cannot be verified. */
  body: RawBody;
  /** Allowed clock skew in seconds, both directions. Default 300. */
  toleranceSeconds?: number;
  /** The current time as a Date or Unix milliseconds. Default `Date.now()`. */
  now?: Date | number;
}

export interface VerifyWebhookInput extends VerificationKeys, VerifyOptions {}

/** A verified delivery. */
export interface WebhookEvent {
  /** The `hook-id`: the same for every retry of a delivery; deduplicate on it. */
  id: string;
  /** The `hook-timestamp` of this attempt, Unix seconds. */
  timestamp: number;
  /** The event name, e.g. `user.created`. */
  type: string;
  /** The event payload. */
  data: Record<string, unknown>;
}

function fail(reason: WebhookVerificationError['reason'], message: string): never {
  throw new WebhookVerificationError(reason, message);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function assertRawBody(body: unknown): asserts body is RawBody {
  if (typeof body === 'string' || body instanceof Uint8Array) return;
  // A programming error, not a bad delivery, hence TypeError: the signature covers the exact bytes
  // sent, and re-serialising a parsed object does not reproduce them.
  throw new TypeError(
    'verifyWebhook needs the raw request body (string, Buffer or Uint8Array), not a parsed object; ' +
      'e.g. use express.raw({ type: "application/json" }) instead of express.json()',
  );
}

function parseTimestamp(value: string): number {
  // Digits only: "1.5", "1e9", " 12" or "-1" are not what any sender emits and would let loosely
  // parsed values slip through Number().
  const timestamp = /^\d{1,15}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(timestamp)) {
    fail('invalid_timestamp', 'The hook-timestamp header must be an integer number of Unix seconds');
  }
  return timestamp;
}

function nowSeconds(now: Date | number | undefined): number {
  const ms = now === undefined ? Date.now() : typeof now === 'number' ? now : now.getTime();
  return Math.floor(ms / 1000);
}

function parsePayload(body: RawBody): Pick<WebhookEvent, 'type' | 'data'> {
  let payload: unknown;
  try {
    const text = typeof body === 'string' ? body : new TextDecoder('utf-8', { fatal: true }).decode(body);
    payload = JSON.parse(text);
  } catch {
    fail('invalid_payload', 'The body is not valid UTF-8 JSON');
  }
  if (!isRecord(payload) || typeof payload.type !== 'string' || !isRecord(payload.data)) {
    fail('invalid_payload', 'The body must be a JSON object with a string "type" and an object "data"');
  }
  return { type: payload.type, data: payload.data };
}

/** Keys decoded once, e.g. when the reference handler is built, rather than on every delivery. */
export type PreparedKeys = { scheme: 'v1'; keys: Buffer[] } | { scheme: 'v1a'; keys: KeyObject[] };

function asList(value: string | readonly string[]): readonly string[] {
  // Anything but an array is one key, so that a null or a number from untyped code is reported by the
  // key's decoder ("must be a string") rather than failing on `.length`.
  return Array.isArray(value) ? value : [value as string];
}

/**
 * Decodes the `secret` or `publicKey` of {@link VerificationKeys}. Passing both or neither is a
 * programming error (TypeError); a malformed key is a `WebhookVerificationError` naming it.
 */
export function prepareKeys(input: VerificationKeys): PreparedKeys {
  const { secret, publicKey } = input;
  if (secret !== undefined && publicKey !== undefined) {
    throw new TypeError(
      'Pass either secret ("whsec_…", v1 signatures) or publicKey ("whpk_…", v1a signatures), not both',
    );
  }
  if (publicKey !== undefined) {
    const keys = asList(publicKey);
    if (keys.length === 0) fail('invalid_public_key', 'At least one public key is required');
    return { scheme: 'v1a', keys: keys.map(decodePublicKey) };
  }
  if (secret === undefined) {
    throw new TypeError(
      'A webhook secret ("whsec_…", v1 signatures) or publicKey ("whpk_…", v1a signatures) is required',
    );
  }
  const secrets = asList(secret);
  if (secrets.length === 0) fail('invalid_secret', 'At least one webhook secret is required');
  return { scheme: 'v1', keys: secrets.map(decodeSecret) };
}

// Each Ed25519 verification costs about 0.1 ms of CPU, so a forged header stuffed with entries must not
// buy more than a few; hookline sends at most two.
const MAX_V1A_SIGNATURES = 10;

function signatureMatches(
  prepared: PreparedKeys,
  header: string,
  id: string,
  timestamp: number,
  body: RawBody,
) {
  const received = parseSignatureHeader(header, prepared.scheme);
  if (received.length === 0) {
    const other: SignatureScheme = prepared.scheme === 'v1' ? 'v1a' : 'v1';
    const hint =
      parseSignatureHeader(header, other).length === 0
        ? ''
        : other === 'v1a'
          ? " (it carries v1a signatures: verify those with the endpoint's publicKey)"
          : " (it carries v1 signatures: verify those with the endpoint's secret)";
    fail('invalid_signature', `The hook-signature header has no ${prepared.scheme} signature${hint}`);
  }
  if (prepared.scheme === 'v1') {
    const expected = prepared.keys.map((key) => computeSignature(key, id, timestamp, body));
    return expected.some((mine) => received.some((theirs) => signaturesEqual(mine, theirs)));
  }
  if (received.length > MAX_V1A_SIGNATURES) {
    fail('invalid_signature', `The hook-signature header has more than ${MAX_V1A_SIGNATURES} v1a signatures`);
  }
  // No constant-time concern here: verifying with a public key involves nothing secret.
  const content = signedContent(id, timestamp, body);
  return prepared.keys.some((key) => received.some((signature) => verifyEd25519(key, content, signature)));
}

/** {@link verifyWebhook} with keys already decoded by {@link prepareKeys}. */
export function verifyWithKeys(prepared: PreparedKeys, input: VerifyOptions): WebhookEvent {
  const { headers, body, toleranceSeconds = DEFAULT_TOLERANCE_SECONDS, now } = input;
  assertRawBody(body);

  const id = readHeader(headers, 'hook-id');
  const rawTimestamp = readHeader(headers, 'hook-timestamp');
  const signatureValue = readHeader(headers, 'hook-signature');
  if (!id || !rawTimestamp || !signatureValue) {
    const present = { 'hook-id': id, 'hook-timestamp': rawTimestamp, 'hook-signature': signatureValue };
    const missing = Object.keys(present).filter((name) => !present[name as keyof typeof present]);
    fail('missing_header', `Missing required header(s): ${missing.join(', ')}`);
  }

  // Checked before the signature so stale replays are rejected cheaply.
  const timestamp = parseTimestamp(rawTimestamp);
  const current = nowSeconds(now);
  if (timestamp < current - toleranceSeconds) {
    fail('timestamp_too_old', `The delivery timestamp is more than ${toleranceSeconds}s in the past`);
  }
  if (timestamp > current + toleranceSeconds) {
    fail('timestamp_too_new', `The delivery timestamp is more than ${toleranceSeconds}s in the future`);
  }

  if (!signatureMatches(prepared, signatureValue, id, timestamp, body)) {
    fail(
      'invalid_signature',
      `No signature matches the ${prepared.scheme === 'v1' ? 'secret' : 'public key'}`,
    );
  }
  return { id, timestamp, ...parsePayload(body) };
}

/**
 * Checks a delivery's headers, timestamp window and signature (`v1` with `secret`, `v1a` with
 * `publicKey`), then parses the body. Throws {@link WebhookVerificationError} on any failure.
 */
export function verifyWebhook(input: VerifyWebhookInput): WebhookEvent {
  assertRawBody(input.body);
  return verifyWithKeys(prepareKeys(input), input);
}
