// Ids are a prefix plus a ULID-style body: 48 bits of milliseconds then 80 random bits, in Crockford
// base32. Sorting ids sorts by creation time, which gives "newest first" lists a stable keyset cursor.
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const BODY = /^[0-9A-HJKMNP-TV-Z]{26}$/;

export const ID_PREFIX = {
  endpoint: 'webhook_',
  message: 'msg_',
  delivery: 'dlv_',
  deadLetter: 'dl_',
  apiKey: 'key_',
  audit: 'audit_',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

function encodeTime(ms: number): string {
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

function encodeRandom(): string {
  const bytes = randomBytes(16);
  let out = '';
  for (let i = 0; i < 16; i++) out += ALPHABET[(bytes[i] ?? 0) % 32];
  return out;
}

export function newId(kind: IdKind, now: number = Date.now()): string {
  return ID_PREFIX[kind] + encodeTime(now) + encodeRandom();
}

export function isId(kind: IdKind, value: string): boolean {
  const prefix = ID_PREFIX[kind];
  return value.startsWith(prefix) && BODY.test(value.slice(prefix.length));
}
