import { createHmac, timingSafeEqual } from 'node:crypto';
import { signV1a } from './ed25519.js';
import { decodeSecret } from './secret.js';
import { signedPrefix, type RawBody } from './signed-content.js';

export type { RawBody } from './signed-content.js';

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
  /**
   * Every currently valid signing key, newest first; each contributes one entry: a `whsec_…` secret a
   * `v1,` entry, a `whsk_…` Ed25519 private key a `v1a,` entry.
   */
  secrets: readonly string[];
}

/** The signature schemes of the `hook-signature` header. */
export type SignatureScheme = 'v1' | 'v1a';

/** HMAC-SHA256 of `<id>.<timestamp>.<body>`; the body is fed as bytes so nothing gets re-encoded. */
export function computeSignature(key: Uint8Array, id: string, timestamp: number, body: RawBody): Buffer {
  return createHmac('sha256', key).update(signedPrefix(id, timestamp)).update(body).digest();
}

/** One signature entry: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`. */
export function sign({ secret, id, timestamp, body }: SignInput): string {
  return 'v1,' + computeSignature(decodeSecret(secret), id, timestamp, body).toString('base64');
}

/**
 * The full `hook-signature` value: one entry per key, space-separated, so a consumer that still holds
 * the old key during a rotation keeps verifying. The key's prefix picks the scheme (`whsk_` → `v1a`,
 * anything else → `v1`), so a rotation that switches scheme signs `v1a,<new> v1,<old>`.
 */
export function signatureHeader({ secrets, id, timestamp, body }: SignatureHeaderInput): string {
  if (secrets.length === 0) throw new TypeError('signatureHeader needs at least one secret');
  return secrets
    .map((key) =>
      key.startsWith('whsk_')
        ? signV1a({ privateKey: key, id, timestamp, body })
        : sign({ secret: key, id, timestamp, body }),
    )
    .join(' ');
}

/**
 * The signatures of one scheme in a header value, decoded. Entries of other versions are skipped so
 * that a header may carry several schemes (a rotation switching scheme) or newer ones. Trailing commas
 * are stripped because Node joins repeated headers with ", ", and base64 never ends in a comma.
 */
export function parseSignatureHeader(header: string, scheme: SignatureScheme = 'v1'): Buffer[] {
  const version = `${scheme},`;
  const signatures: Buffer[] = [];
  for (const raw of header.split(/\s+/)) {
    const entry = raw.replace(/,+$/, '');
    if (entry.startsWith(version)) signatures.push(Buffer.from(entry.slice(version.length), 'base64'));
  }
  return signatures;
}

/** Constant-time comparison; a length mismatch is not secret (every HMAC-SHA256 is 32 bytes). */
export function signaturesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
