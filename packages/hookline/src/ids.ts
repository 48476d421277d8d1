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
  replay: 'rpl_',
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

// Random bytes are drawn in blocks: one call to the system's generator per 256 ids, not one per id.
const POOL_BYTES = 16 * 256;
let pool = Buffer.alloc(0);
let offset = POOL_BYTES;

function encodeRandom(): string {
  if (offset >= pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  let out = '';
  for (let i = 0; i < 16; i++) out += ALPHABET[(pool[offset + i] ?? 0) % 32];
  offset += 16;
  return out;
}

let lastMs = -1;
let lastRandom = '';

/**
 * The next base32 string of the same length (the random part is 80 bits: it does not run over): the
 * last digit below the highest goes up by one and the digits after it wrap to the lowest. A fan-out
 * makes hundreds of ids in one millisecond, so this builds no array per id.
 */
function increment(random: string): string {
  for (let i = random.length - 1; i >= 0; i--) {
    const d = ALPHABET.indexOf(random[i]!);
    if (d < 31) return random.slice(0, i) + ALPHABET[d + 1]! + ALPHABET[0]!.repeat(random.length - 1 - i);
  }
  return ALPHABET[0]!.repeat(random.length);
}

/**
 * Ids made by one process within the same millisecond sort in the order they were made (the random part
 * is incremented, as monotonic ULIDs do): two dead letters of one ordering key that die in the same
 * millisecond are replayed in that order (docs/architecture.md, "Ordering keys").
 */
export function newId(kind: IdKind, now: number = Date.now()): string {
  lastRandom = now === lastMs ? increment(lastRandom) : encodeRandom();
  lastMs = now;
  return ID_PREFIX[kind] + encodeTime(now) + lastRandom;
}

/**
 * The smallest id of `kind` created at `ms`: every id created earlier sorts below it, so a primary-key
 * range finds rows by age without an index on a time column.
 */
export function idAt(kind: IdKind, ms: number): string {
  return ID_PREFIX[kind] + encodeTime(ms);
}

export function isId(kind: IdKind, value: string): boolean {
  const prefix = ID_PREFIX[kind];
  return value.startsWith(prefix) && BODY.test(value.slice(prefix.length));
}
