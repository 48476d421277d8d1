import { WebhookVerificationError } from './errors.js';
import { readHeader, type WebhookHeaders } from './headers.js';
import { decodeSecret } from './secret.js';
import { computeSignature, parseSignatureHeader, signaturesEqual, type RawBody } from './signature.js';

/** The spec's replay window: deliveries older (or further in the future) than 5 minutes are rejected. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export interface VerifyWebhookInput {
  /** The endpoint's `whsec_…` secret, or several while you rotate your own copy. */
  secret: string | readonly string[];
  /** Request headers: Node-style object (any case) or a WHATWG `Headers`. */
  headers: WebhookHeaders;
  /** The raw body, exactly as received. A parsed JSON object cannot be verified. */
  body: RawBody;
  /** Allowed clock skew in seconds, both directions. Default 300. */
  toleranceSeconds?: number;
  /** The current time as a Date or Unix milliseconds. Default `Date.now()`. */
  now?: Date | number;
}

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

/**
 * Checks a delivery's headers, timestamp window and signature, then parses the body.
 * Throws {@link WebhookVerificationError} on any failure.
 */
export function verifyWebhook(input: VerifyWebhookInput): WebhookEvent {
  const { headers, body, toleranceSeconds = DEFAULT_TOLERANCE_SECONDS, now } = input;
  assertRawBody(body);
  const secrets = typeof input.secret === 'string' ? [input.secret] : input.secret;
  if (secrets.length === 0) fail('invalid_secret', 'At least one webhook secret is required');
  const keys = secrets.map(decodeSecret);

  const id = readHeader(headers, 'hook-id');
  const rawTimestamp = readHeader(headers, 'hook-timestamp');
  const signatureValue = readHeader(headers, 'hook-signature');
  if (!id || !rawTimestamp || !signatureValue) {
    const present = { 'hook-id': id, 'hook-timestamp': rawTimestamp, 'hook-signature': signatureValue };
    const missing = Object.keys(present).filter((name) => !present[name as keyof typeof present]);
    fail('missing_header', `Missing required header(s): ${missing.join(', ')}`);
  }

  // Checked before the HMAC so stale replays are rejected cheaply.
  const timestamp = parseTimestamp(rawTimestamp);
  const current = nowSeconds(now);
  if (timestamp < current - toleranceSeconds) {
    fail('timestamp_too_old', `The delivery timestamp is more than ${toleranceSeconds}s in the past`);
  }
  if (timestamp > current + toleranceSeconds) {
    fail('timestamp_too_new', `The delivery timestamp is more than ${toleranceSeconds}s in the future`);
  }

  const received = parseSignatureHeader(signatureValue);
  if (received.length === 0) fail('invalid_signature', 'The hook-signature header has no v1 signature');
  const expected = keys.map((key) => computeSignature(key, id, timestamp, body));
  const matches = expected.some((mine) => received.some((theirs) => signaturesEqual(mine, theirs)));
  if (!matches) fail('invalid_signature', 'No signature matches the secret');

  return { id, timestamp, ...parsePayload(body) };
}
