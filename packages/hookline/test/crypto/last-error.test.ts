// What a failed attempt stores (engine/last-error.ts): hookline's reason in clear, the subscriber's
// answer sealed to its row. The at-rest proofs are in test/delivery/retries.test.ts and
// test/delivery/sender-at-rest.test.ts.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Envelope, encryptionKeyFromBase64 } from '../../src/crypto/envelope.js';
import {
  deadLetterAnswerAad,
  deliveryAnswerAad,
  sealAnswer,
  showLastError,
  splitError,
} from '../../src/engine/last-error.js';

const envelope = new Envelope(encryptionKeyFromBase64(randomBytes(32).toString('base64')));

describe('last errors', () => {
  it.each([
    ['HTTP 500: {"received":{"email":"a@b.c"}}', 'HTTP 500', '{"received":{"email":"a@b.c"}}'],
    [
      'HTTP 307 (redirects are not followed): moved: see /x',
      'HTTP 307 (redirects are not followed)',
      'moved: see /x',
    ],
    ['HTTP 503: line one\nline two', 'HTTP 503', 'line one\nline two'],
    ['HTTP 404', 'HTTP 404', null],
    ['HTTP 502: ', 'HTTP 502', null],
    ['timed out after 2000 ms', 'timed out after 2000 ms', null],
    [
      'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9',
      'ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9',
      null,
    ],
    ['invalid HTTP answer (HPE_INVALID_STATUS)', 'invalid HTTP answer (HPE_INVALID_STATUS)', null],
    [
      'TLS: self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)',
      'TLS: self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)',
      null,
    ],
  ])('splits %j into reason and answer', (error, reason, answer) => {
    expect(splitError(error)).toEqual({ reason, answer });
  });

  it('seals the answer to its row: shown to operators there, unreadable anywhere else', () => {
    const sealed = sealAnswer(envelope, 'echo of a@b.c', deliveryAnswerAad('dlv_1'))!;
    expect(sealed.includes(Buffer.from('a@b.c'))).toBe(false);
    expect(showLastError(envelope, 'HTTP 500', sealed, deliveryAnswerAad('dlv_1'))).toBe(
      'HTTP 500: echo of a@b.c',
    );
    for (const aad of [deliveryAnswerAad('dlv_2'), deadLetterAnswerAad('dlv_1')]) {
      expect(showLastError(envelope, 'HTTP 500', sealed, aad)).toBe(
        'HTTP 500: (the answer cannot be decrypted with the configured keys)',
      );
    }
    expect(sealAnswer(envelope, null, deliveryAnswerAad('dlv_1'))).toBeNull();
    expect(showLastError(envelope, 'timed out after 5 ms', null, deliveryAnswerAad('dlv_1'))).toBe(
      'timed out after 5 ms',
    );
    expect(showLastError(envelope, null, null, deliveryAnswerAad('dlv_1'))).toBeNull();
  });
});
