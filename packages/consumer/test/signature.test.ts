import { describe, it, expect } from 'vitest';
import {
  decodeSecret,
  generateSecret,
  sign,
  signatureHeader,
  WebhookVerificationError,
} from '../src/index.js';
import allVectors from './vectors.json' with { type: 'json' };

const vectors = allVectors.v1;

describe('shared test vectors', () => {
  it.each(vectors)('sign() reproduces "$name"', ({ secret, id, timestamp, body, signature }) => {
    expect(sign({ secret, id, timestamp, body })).toBe(signature);
  });

  it('signs Buffer and Uint8Array bodies byte for byte like strings', () => {
    for (const { secret, id, timestamp, body, signature } of vectors) {
      expect(sign({ secret, id, timestamp, body: Buffer.from(body) })).toBe(signature);
      expect(sign({ secret, id, timestamp, body: new TextEncoder().encode(body) })).toBe(signature);
    }
  });
});

describe('secrets', () => {
  it('generates whsec_ + base64 of 32 random bytes', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(decodeSecret(secret)).toHaveLength(32);
    expect(generateSecret()).not.toBe(secret);
  });

  it('decodes with or without the whsec_ prefix', () => {
    const key = decodeSecret('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
    expect(key).toHaveLength(24);
    expect(decodeSecret('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')).toEqual(key);
  });

  it.each(['', 'whsec_', 'whsec_not base64!', 'whsec_abc$def', 'whsec_a'])('rejects %j', (secret) => {
    expect(() => decodeSecret(secret)).toThrow(expect.objectContaining({ reason: 'invalid_secret' }));
    expect(() => decodeSecret(secret)).toThrow(WebhookVerificationError);
  });
});

describe('signatureHeader', () => {
  const [first, second] = vectors;
  const message = { id: 'msg_rotation', timestamp: 1795312345, body: '{"type":"user.created","data":{}}' };

  it('joins one v1 entry per secret with a single space, in order', () => {
    const header = signatureHeader({ ...message, secrets: [first!.secret, second!.secret] });
    expect(header).toBe(
      `${sign({ ...message, secret: first!.secret })} ${sign({ ...message, secret: second!.secret })}`,
    );
  });

  it('needs at least one secret', () => {
    expect(() => signatureHeader({ ...message, secrets: [] })).toThrow(TypeError);
  });

  it('refuses a non-integer timestamp', () => {
    expect(() => sign({ ...message, secret: first!.secret, timestamp: 1795312345.5 })).toThrow(TypeError);
  });
});
