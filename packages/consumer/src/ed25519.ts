import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';
import { decodeBase64 } from './base64.js';
import { WebhookVerificationError } from './errors.js';
import { signedContent, type RawBody } from './signed-content.js';

const PUBLIC_PREFIX = 'whpk_';
const PRIVATE_PREFIX = 'whsk_';
// A PKCS#8 envelope for a raw 32-byte Ed25519 seed (RFC 8410 §7): Node has no raw-key import for
// private keys, and these 16 bytes followed by the seed are that document.
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const VERSION = 'v1a,';

export interface Ed25519KeyPair {
  /** `whsk_` + base64 of the 32-byte seed. Keep it secret: whoever holds it can sign deliveries. */
  privateKey: string;
  /** `whpk_` + base64 of the 32 raw public-key bytes. Safe to publish. */
  publicKey: string;
}

export interface SignV1aInput {
  /** A `whsk_…` private key. */
  privateKey: string;
  /** The `hook-id` header value. */
  id: string;
  /** The `hook-timestamp` header value: integer Unix seconds. */
  timestamp: number;
  /** The raw body. */
  body: RawBody;
}

function invalidPrivateKey(): never {
  throw new WebhookVerificationError(
    'invalid_private_key',
    'The private key must be "whsk_" followed by base64 of the 32-byte Ed25519 seed ' +
      '(or of 64 bytes: seed then public key)',
  );
}

function rawPublicKey(privateKey: KeyObject): Buffer {
  // The JWK export is the one raw-bytes export Node 20 offers for Ed25519 keys.
  return Buffer.from(createPublicKey(privateKey).export({ format: 'jwk' }).x as string, 'base64url');
}

/** A fresh key pair for the `v1a` scheme (Standard Webhooks' Ed25519 signatures). */
export function generateEd25519KeyPair(): Ed25519KeyPair {
  const { privateKey } = generateKeyPairSync('ed25519');
  const jwk = privateKey.export({ format: 'jwk' });
  return {
    privateKey: PRIVATE_PREFIX + Buffer.from(jwk.d as string, 'base64url').toString('base64'),
    publicKey: PUBLIC_PREFIX + Buffer.from(jwk.x as string, 'base64url').toString('base64'),
  };
}

/**
 * Decoded private keys by their text. Importing a PKCS#8 key costs about ten times an Ed25519
 * signature, and a sender signs every attempt with the same few keys; the bound keeps a sender
 * with many endpoints from growing it without limit.
 */
const privateKeys = new Map<string, KeyObject>();
const MAX_CACHED_PRIVATE_KEYS = 1024;

function importPrivateKey(privateKey: string): KeyObject {
  if (typeof privateKey !== 'string') invalidPrivateKey();
  const encoded = privateKey.startsWith(PRIVATE_PREFIX)
    ? privateKey.slice(PRIVATE_PREFIX.length)
    : privateKey;
  const bytes = decodeBase64(encoded);
  // 32 bytes is the seed (what Standard Webhooks' reference libraries read); 64 is the seed followed by
  // the public key (libsodium's and Svix's form), accepted when the two halves agree.
  if (bytes === undefined || (bytes.length !== 32 && bytes.length !== 64)) invalidPrivateKey();
  const key = createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, bytes.subarray(0, 32)]),
    format: 'der',
    type: 'pkcs8',
  });
  if (bytes.length === 64 && !rawPublicKey(key).equals(bytes.subarray(32))) invalidPrivateKey();
  return key;
}

/** The KeyObject behind a `whsk_` key; throws `WebhookVerificationError` `invalid_private_key`. */
export function decodePrivateKey(privateKey: string): KeyObject {
  let key = privateKeys.get(privateKey);
  if (key === undefined) {
    key = importPrivateKey(privateKey);
    if (privateKeys.size >= MAX_CACHED_PRIVATE_KEYS) privateKeys.delete(privateKeys.keys().next().value!);
    privateKeys.set(privateKey, key);
  }
  return key;
}

/** The `whpk_` public key that belongs to a `whsk_` private key. */
export function derivePublicKey(privateKey: string): string {
  return PUBLIC_PREFIX + rawPublicKey(decodePrivateKey(privateKey)).toString('base64');
}

/**
 * The KeyObject behind a `whpk_` public key (prefix optional, as for secrets). Throws
 * `WebhookVerificationError` `invalid_public_key`, naming the likely mix-up when a secret or a private
 * key was passed instead.
 */
export function decodePublicKey(publicKey: string): KeyObject {
  const fail = (message: string): never => {
    throw new WebhookVerificationError('invalid_public_key', message);
  };
  if (typeof publicKey !== 'string') fail('The public key must be a string');
  if (publicKey.startsWith('whsec_')) {
    fail('publicKey was given a "whsec_" secret: pass it as `secret` to verify v1 signatures');
  }
  if (publicKey.startsWith(PRIVATE_PREFIX)) {
    fail('publicKey was given a "whsk_" private key: pass the endpoint\'s public_key ("whpk_…") instead');
  }
  const encoded = publicKey.startsWith(PUBLIC_PREFIX) ? publicKey.slice(PUBLIC_PREFIX.length) : publicKey;
  const bytes = decodeBase64(encoded);
  if (bytes === undefined || bytes.length !== 32) {
    fail('The public key must be "whpk_" followed by base64 of the 32 raw Ed25519 public-key bytes');
  }
  return createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: bytes!.toString('base64url') },
    format: 'jwk',
  });
}

/** One `v1a` signature entry: `v1a,<base64 Ed25519 signature of "<id>.<timestamp>.<body>">`. */
export function signV1a({ privateKey, id, timestamp, body }: SignV1aInput): string {
  const signature = sign(null, signedContent(id, timestamp, body), decodePrivateKey(privateKey));
  return VERSION + signature.toString('base64');
}

/** Whether `signature` is a valid Ed25519 signature of `content` under `key`. */
export function verifyEd25519(key: KeyObject, content: Buffer, signature: Buffer): boolean {
  // Every Ed25519 signature is 64 bytes; anything else cannot match and is not worth a verify call.
  return signature.length === 64 && verify(null, content, key, signature);
}
