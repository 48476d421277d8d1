import { createHmac, timingSafeEqual } from 'node:crypto';
import { decodeSecret } from './secret.js';

/** A raw request body, exactly as received or sent: signatures are over bytes, never re-serialised JSON. */
export type RawBody = string | Uint8Array;

export interface SignInput {
  /** A `whsec_…` secret. */
  secret: string;
  /** The `hook-id` header value. */
  id: string;
  /** The `hook-timestamp` header value: integer Unix seconds. */
  timestamp: number;
  /** The raw body. */
  body: RawBody;
}

export interface SignatureHeaderInput extends Omit<SignInput, 'secret'> {
  /** Every currently valid secret, newest first; each contributes one `v1,` entry. */
  secrets: readonly string[];
}

const VERSION = 'v1,';

/** HMAC-SHA256 of `<id>.<timestamp>.<body>`; the body is fed as bytes so nothing gets re-encoded. */
export function computeSignature(key: Uint8Array, id: string, timestamp: number, body: RawBody): Buffer {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new TypeError(`timestamp must be a non-negative integer of Unix seconds, got ${timestamp}`);
  }
  return createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest();
}

/** One signature entry: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`. */
export function sign({ secret, id, timestamp, body }: SignInput): string {
  return VERSION + computeSignature(decodeSecret(secret), id, timestamp, body).toString('base64');
}

/**
 * The full `hook-signature` value: one `v1,` entry per secret, space-separated, so a consumer that
 * still holds the old secret during a rotation keeps verifying.
 */
export function signatureHeader({ secrets, id, timestamp, body }: SignatureHeaderInput): string {
  if (secrets.length === 0) throw new TypeError('signatureHeader needs at least one secret');
  return secrets.map((secret) => sign({ secret, id, timestamp, body })).join(' ');
}

/**
 * The `v1` signatures in a header value, decoded. Other versions are skipped so that a sender may add
 * newer schemes alongside v1. Trailing commas are stripped because Node joins repeated headers with
 * ", ", and base64 never ends in a comma.
 */
export function parseSignatureHeader(header: string): Buffer[] {
  const signatures: Buffer[] = [];
  for (const raw of header.split(/\s+/)) {
    const entry = raw.replace(/,+$/, '');
    if (entry.startsWith(VERSION)) signatures.push(Buffer.from(entry.slice(VERSION.length), 'base64'));
  }
  return signatures;
}

/** Constant-time comparison; a length mismatch is not secret (every HMAC-SHA256 is 32 bytes). */
export function signaturesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
