// The AES-256-GCM envelope every stored payload, dead letter and signing secret goes through
// (docs/contract.md §6): round trip, AAD binding, tamper detection and key rotation.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  DecryptionError,
  Envelope,
  encryptionKeyFromBase64,
  type EncryptionKey,
} from '../../src/crypto/envelope.js';
import { deadLetterAad, openOriginal } from '../../src/engine/sealing.js';

const newKey = (): EncryptionKey => encryptionKeyFromBase64(randomBytes(32).toString('base64'));
const BODY = '{"type":"user.created","data":{"userId":"user_29w","email":"ada@example.com"}}';

function expectDecryptionError(fn: () => unknown, message: RegExp): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(DecryptionError);
  expect((caught as Error).message).toMatch(message);
}

describe('Envelope', () => {
  const key = newKey();
  const envelope = new Envelope(key);

  it('seals and opens text and bytes', () => {
    const sealed = envelope.seal(BODY, 'message:msg_1');
    expect(envelope.openText(sealed, 'message:msg_1')).toBe(BODY);
    const bytes = randomBytes(300);
    expect(envelope.open(envelope.seal(bytes, 'x'), 'x').equals(bytes)).toBe(true);
    expect(envelope.openText(envelope.seal('', 'empty'), 'empty')).toBe('');
  });

  it('writes the documented layout: version 1, key id, 12-byte nonce, ciphertext, 16-byte tag', () => {
    const sealed = envelope.seal(BODY, 'a');
    expect(sealed[0]).toBe(1);
    expect(sealed[1]).toBe(key.id.length);
    expect(sealed.subarray(2, 2 + key.id.length).toString('ascii')).toBe(key.id);
    expect(sealed.length).toBe(2 + key.id.length + 12 + Buffer.byteLength(BODY) + 16);
    expect(envelope.keyId).toBe(key.id);
  });

  it('never contains the plaintext and uses a fresh nonce each time', () => {
    const a = envelope.seal(BODY, 'a');
    const b = envelope.seal(BODY, 'a');
    expect(a.equals(b)).toBe(false);
    expect(
      a
        .subarray(2 + key.id.length, 14 + key.id.length)
        .equals(b.subarray(2 + key.id.length, 14 + key.id.length)),
    ).toBe(false);
    for (const sealed of [a, b]) {
      expect(sealed.includes(Buffer.from('user_29w'))).toBe(false);
      expect(sealed.includes(Buffer.from('ada@example.com'))).toBe(false);
    }
  });

  it('never repeats a nonce, across the blocks nonces are drawn in (1,000 seals)', () => {
    const nonces = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const sealed = envelope.seal(BODY, 'a');
      nonces.add(sealed.subarray(2 + key.id.length, 14 + key.id.length).toString('hex'));
      expect(envelope.openText(sealed, 'a')).toBe(BODY);
    }
    expect(nonces.size).toBe(1000);
  });

  it('derives the key id from the key: same key, same id; different key, different id', () => {
    const base64 = randomBytes(32).toString('base64');
    expect(encryptionKeyFromBase64(base64).id).toBe(encryptionKeyFromBase64(base64).id);
    expect(encryptionKeyFromBase64(base64).id).toMatch(/^[0-9a-f]{12}$/);
    expect(newKey().id).not.toBe(key.id);
    expect(() => encryptionKeyFromBase64(randomBytes(16).toString('base64'))).toThrow(/32 bytes/);
  });

  it('refuses the wrong additional authenticated data (a ciphertext moved to another row)', () => {
    const sealed = envelope.seal(BODY, 'message:msg_1');
    expectDecryptionError(() => envelope.open(sealed, 'message:msg_2'), /failed authentication/);
    expectDecryptionError(() => envelope.open(sealed, ''), /failed authentication/);
  });

  it('refuses any tampered byte of nonce, ciphertext or tag', () => {
    const sealed = envelope.seal(BODY, 'aad');
    const start = 2 + key.id.length;
    const positions = [start, start + 11, start + 12, start + 20, sealed.length - 16, sealed.length - 1];
    for (const i of positions) {
      const tampered = Buffer.from(sealed);
      tampered[i] = (tampered[i] ?? 0) ^ 0x01;
      expectDecryptionError(() => envelope.open(tampered, 'aad'), /failed authentication/);
    }
  });

  it('refuses a truncated or foreign envelope', () => {
    const sealed = envelope.seal(BODY, 'aad');
    expectDecryptionError(
      () => envelope.open(sealed.subarray(0, 2 + key.id.length + 20), 'aad'),
      /truncated/,
    );
    expectDecryptionError(() => envelope.open(Buffer.from([2, 0]), 'aad'), /unknown envelope version/);
    expectDecryptionError(() => envelope.open(Buffer.alloc(0), 'aad'), /unknown envelope version/);
  });

  it('opens a ciphertext sealed with an old key when that key is passed as previous', () => {
    const oldKey = newKey();
    const sealedBefore = new Envelope(oldKey).seal(BODY, 'dead_letter:dl_1');
    const rotated = new Envelope(newKey(), [oldKey]);
    expect(rotated.openText(sealedBefore, 'dead_letter:dl_1')).toBe(BODY);
    // New writes use the new key; the old key only decrypts.
    const sealedAfter = rotated.seal(BODY, 'x');
    expect(sealedAfter.subarray(2, 2 + sealedAfter[1]!).toString('ascii')).toBe(rotated.keyId);
    expect(rotated.keyId).not.toBe(oldKey.id);
    expectDecryptionError(
      () => new Envelope(oldKey).open(sealedAfter, 'x'),
      /which this process does not have/,
    );
  });

  it('fails clearly, naming the key id, when the key is unknown', () => {
    const other = newKey();
    const sealed = new Envelope(other).seal(BODY, 'aad');
    expectDecryptionError(
      () => envelope.open(sealed, 'aad'),
      new RegExp(`sealed with key ${other.id}, which this process does not have`),
    );
  });

  it('a key with the right id but the wrong bytes fails authentication', () => {
    const sealed = envelope.seal(BODY, 'aad');
    const impostor = new Envelope({ id: key.id, key: randomBytes(32) });
    expectDecryptionError(() => impostor.open(sealed, 'aad'), /failed authentication/);
  });

  it('digest is keyed: same text same digest, another key another digest', () => {
    expect(envelope.digest(BODY)).toBe(envelope.digest(BODY));
    expect(envelope.digest(BODY)).toMatch(/^[0-9a-f]{64}$/);
    expect(new Envelope(newKey()).digest(BODY)).not.toBe(envelope.digest(BODY));
  });
});

describe('dead-letter codec', () => {
  const envelope = new Envelope(newKey());

  it('opens the original under its own dead-letter id only', () => {
    const original = { body: BODY, headers: { 'hook-id': 'msg_1', 'content-type': 'application/json' } };
    const sealed = envelope.seal(JSON.stringify(original), deadLetterAad('dl_1'));
    expect(openOriginal(envelope, 'dl_1', sealed)).toEqual(original);
    expect(() => openOriginal(envelope, 'dl_2', sealed)).toThrow(DecryptionError);
  });
});
