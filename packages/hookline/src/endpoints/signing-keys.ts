// What an endpoint signs with, by scheme (docs/contract.md §5): v1 endpoints an HMAC secret (whsec_…),
// v1a endpoints an Ed25519 key pair, whose private key (whsk_…) is stored where a v1 secret is, and
// whose public key (whpk_…) is on the endpoint object. @hookline/consumer's signatureHeader picks the
// scheme of each stored key by its prefix, so delivery signs either kind the same way.
import { generateEd25519KeyPair, generateSecret } from '@hookline/consumer';
import type { SignatureScheme } from '../store/endpoints.js';

export interface NewSigningKey {
  /** What is sealed into the endpoint row: a whsec_ secret or a whsk_ private key. */
  stored: string;
  /** The v1a public key; null for v1. */
  publicKey: string | null;
}

export function newSigningKey(scheme: SignatureScheme): NewSigningKey {
  if (scheme === 'v1a') {
    const pair = generateEd25519KeyPair();
    return { stored: pair.privateKey, publicKey: pair.publicKey };
  }
  return { stored: generateSecret(), publicKey: null };
}

/**
 * What create and rotate-secret answer besides the id: a v1 endpoint's secret, shown only then; a v1a
 * endpoint's public key (its private key never leaves hookline).
 */
export function revealed(
  scheme: SignatureScheme,
  key: NewSigningKey,
): { signing_secret: string } | { public_key: string } {
  return scheme === 'v1a' ? { public_key: key.publicKey! } : { signing_secret: key.stored };
}
