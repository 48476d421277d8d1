// AES-256-GCM envelopes for everything hookline stores that a copy of the database must not reveal:
// event payloads, dead-letter messages and endpoint signing secrets.
//
// Layout: [version=1][key id length][key id (ascii)][12-byte nonce][ciphertext][16-byte tag]
// The key id travels with the ciphertext so the key can rotate: new writes use the current key,
// old rows still open with the key they name. The caller's row ids are additional authenticated
// data, so a ciphertext copied into another row fails to open instead of leaking there.
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';

const VERSION = 1;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** HKDF's info for the key of keyHash: a fixed label, so every process derives the same key. */
const KEY_HASH_INFO = 'hookline key hash v1';

export type KeyHashKind = 'ordering' | 'idempotency';

export class DecryptionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DecryptionError';
  }
}

export interface EncryptionKey {
  readonly id: string;
  readonly key: Buffer;
}

/** A key's id is derived from the key itself, so the same key always has the same id on every process. */
export function encryptionKeyFromBase64(base64: string): EncryptionKey {
  const key = Buffer.from(base64, 'base64');
  if (key.length !== 32) throw new Error('an encryption key is 32 bytes');
  const id = createHash('sha256').update(key).digest('hex').slice(0, 12);
  return { id, key };
}

// Nonces are drawn from the system's generator in blocks, one call per 256 seals: a call per seal was
// ~4 % of an emit's CPU. Each block is a new buffer and each nonce a slice of it used once, so no two
// seals share a nonce (random 96-bit nonces, as before).
const NONCE_POOL_BYTES = NONCE_BYTES * 256;
let noncePool = Buffer.alloc(0);
let nonceOffset = 0;

function nextNonce(): Buffer {
  if (nonceOffset + NONCE_BYTES > noncePool.length) {
    noncePool = randomBytes(NONCE_POOL_BYTES);
    nonceOffset = 0;
  }
  const nonce = noncePool.subarray(nonceOffset, nonceOffset + NONCE_BYTES);
  nonceOffset += NONCE_BYTES;
  return nonce;
}

export class Envelope {
  private readonly byId: Map<string, Buffer>;
  private readonly digestKey: Buffer;
  private readonly keyHashKey: Buffer;
  /** The version and key id every seal starts with: the same bytes for every seal with this key. */
  private readonly header: Buffer;

  /** `current` encrypts; `previous` keys only decrypt (rows written before a key rotation). */
  constructor(
    private readonly current: EncryptionKey,
    previous: readonly EncryptionKey[] = [],
  ) {
    this.byId = new Map([...previous, current].map((k) => [k.id, k.key]));
    this.digestKey = Buffer.from(hkdfSync('sha256', current.key, Buffer.alloc(0), 'hookline digest', 32));
    this.keyHashKey = Buffer.from(hkdfSync('sha256', current.key, Buffer.alloc(0), KEY_HASH_INFO, 32));
    const keyId = Buffer.from(current.id, 'ascii');
    this.header = Buffer.concat([Buffer.from([VERSION, keyId.length]), keyId]);
  }

  /** A keyed digest, for comparing data that must not be stored in clear (an unkeyed hash would confirm guesses). */
  digest(text: string): string {
    return createHmac('sha256', this.digestKey).update(text).digest('hex');
  }

  /**
   * What is stored of a tenant's `ordering_key` or `Idempotency-Key` (docs/security.md, "What is
   * stored"): HMAC-SHA256 under a key derived from the encryption key, over the kind of key, the
   * tenant and the value, so equal values of one tenant match (lines and idempotency work as on the
   * values) while equal values of two tenants, or an ordering key and an Idempotency-Key, do not.
   * Tenant ids hold no NUL (`tenants.ts`) and neither kind of key does, so the input is unambiguous.
   */
  keyHash(kind: KeyHashKind, tenantId: string, value: string): string {
    return createHmac('sha256', this.keyHashKey)
      .update(`${kind}\u0000${tenantId}\u0000${value}`)
      .digest('base64url');
  }

  get keyId(): string {
    return this.current.id;
  }

  // Every stored payload is sealed on an emit and opened on each delivery, so both copy as little as
  // they can: GCM's final() adds no bytes, and the sealed layout is written in one allocation.
  seal(plaintext: Buffer | string, aad: string): Buffer {
    const nonce = nextNonce();
    const cipher = createCipheriv('aes-256-gcm', this.current.key, nonce);
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const body = cipher.update(plaintext);
    cipher.final();
    return Buffer.concat([this.header, nonce, body, cipher.getAuthTag()]);
  }

  open(sealed: Buffer, aad: string): Buffer {
    if (sealed.length < 2 || sealed[0] !== VERSION) throw new DecryptionError('unknown envelope version');
    const keyIdLength = sealed[1] ?? 0;
    const keyId = sealed.subarray(2, 2 + keyIdLength).toString('ascii');
    const key = this.byId.get(keyId);
    if (!key) throw new DecryptionError(`sealed with key ${keyId}, which this process does not have`);
    const nonceStart = 2 + keyIdLength;
    const tagStart = sealed.length - TAG_BYTES;
    if (tagStart < nonceStart + NONCE_BYTES) throw new DecryptionError('envelope is truncated');
    const decipher = createDecipheriv(
      'aes-256-gcm',
      key,
      sealed.subarray(nonceStart, nonceStart + NONCE_BYTES),
    );
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(sealed.subarray(tagStart));
    try {
      const plaintext = decipher.update(sealed.subarray(nonceStart + NONCE_BYTES, tagStart));
      decipher.final(); // checks the tag; GCM has no bytes left to give
      return plaintext;
    } catch {
      throw new DecryptionError('envelope failed authentication (wrong key, wrong row or tampered data)');
    }
  }

  openText(sealed: Buffer, aad: string): string {
    return this.open(sealed, aad).toString('utf8');
  }
}
