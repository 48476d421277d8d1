import { describe, it, expect } from 'vitest';
import {
  generateSecret,
  sign,
  signatureHeader,
  verifyWebhook,
  WebhookVerificationError,
  type VerifyWebhookInput,
} from '../src/index.js';
import vectors from './vectors.json' with { type: 'json' };

const v1Vectors = vectors.v1;

const secret = generateSecret();
const nowMs = 1_795_312_345_678;
const timestamp = Math.floor(nowMs / 1000);
const id = 'msg_2fVerifyTest';
const body = '{"type":"user.created","data":{"userId":"user_29w"}}';

function delivery(overrides: Partial<VerifyWebhookInput> = {}): VerifyWebhookInput {
  return {
    secret,
    headers: {
      'hook-id': id,
      'hook-timestamp': String(timestamp),
      'hook-signature': sign({ secret, id, timestamp, body }),
    },
    body,
    now: nowMs,
    ...overrides,
  };
}

// Strings are for malformed timestamps, which are rejected before the signature is looked at.
function headersAt(ts: number | string): Record<string, string> {
  const signature = typeof ts === 'number' ? sign({ secret, id, timestamp: ts, body }) : 'v1,unused';
  return { 'hook-id': id, 'hook-timestamp': String(ts), 'hook-signature': signature };
}

function rejection(input: VerifyWebhookInput): WebhookVerificationError {
  try {
    verifyWebhook(input);
  } catch (error) {
    expect(error).toBeInstanceOf(WebhookVerificationError);
    return error as WebhookVerificationError;
  }
  throw new Error('expected verifyWebhook to throw');
}

describe('verifyWebhook', () => {
  it('accepts a valid delivery and returns the parsed event', () => {
    expect(verifyWebhook(delivery())).toEqual({
      id,
      timestamp,
      type: 'user.created',
      data: { userId: 'user_29w' },
    });
  });

  it.each(v1Vectors)('accepts shared vector "$name"', (vector) => {
    const headers = {
      'hook-id': vector.id,
      'hook-timestamp': String(vector.timestamp),
      'hook-signature': vector.signature,
    };
    const input = { secret: vector.secret, headers, body: vector.body, now: vector.timestamp * 1000 };
    // The reference vector's body is not a hookline event, so only its signature can pass.
    if (vector.body.includes('"type"')) expect(verifyWebhook(input).id).toBe(vector.id);
    else expect(rejection(input).reason).toBe('invalid_payload');
  });

  it('accepts Buffer and Uint8Array bodies', () => {
    expect(verifyWebhook(delivery({ body: Buffer.from(body) })).type).toBe('user.created');
    expect(verifyWebhook(delivery({ body: new TextEncoder().encode(body) })).type).toBe('user.created');
  });

  it('rejects a tampered body', () => {
    const tampered = body.replace('user_29w', 'user_evil');
    expect(rejection(delivery({ body: tampered })).reason).toBe('invalid_signature');
  });

  it('rejects a tampered hook-id', () => {
    const headers = { ...headersAt(timestamp), 'hook-id': 'msg_other' };
    expect(rejection(delivery({ headers })).reason).toBe('invalid_signature');
  });

  it('rejects the wrong secret', () => {
    expect(rejection(delivery({ secret: generateSecret() })).reason).toBe('invalid_signature');
  });

  it('rejects a timestamp more than 5 minutes old, accepts exactly 5 minutes', () => {
    expect(rejection(delivery({ headers: headersAt(timestamp - 301) })).reason).toBe('timestamp_too_old');
    expect(verifyWebhook(delivery({ headers: headersAt(timestamp - 300) })).id).toBe(id);
  });

  it('rejects a timestamp more than 5 minutes in the future, accepts exactly 5 minutes', () => {
    expect(rejection(delivery({ headers: headersAt(timestamp + 301) })).reason).toBe('timestamp_too_new');
    expect(verifyWebhook(delivery({ headers: headersAt(timestamp + 300) })).id).toBe(id);
  });

  it('honours toleranceSeconds and a Date for now', () => {
    const headers = headersAt(timestamp - 60);
    expect(rejection(delivery({ headers, toleranceSeconds: 30 })).reason).toBe('timestamp_too_old');
    expect(verifyWebhook(delivery({ headers, now: new Date(nowMs) })).id).toBe(id);
  });

  it.each(['hook-id', 'hook-timestamp', 'hook-signature'])('rejects a missing %s', (name) => {
    const headers: Record<string, string> = { ...headersAt(timestamp) };
    delete headers[name];
    const error = rejection(delivery({ headers }));
    expect(error.reason).toBe('missing_header');
    expect(error.message).toContain(name);
  });

  it('rejects an empty header as missing', () => {
    const headers = { ...headersAt(timestamp), 'hook-signature': '' };
    expect(rejection(delivery({ headers })).reason).toBe('missing_header');
  });

  it.each(['1795312345.5', '1.7e9', 'abc', '-1', ' 1795312345', '0x6b0a1c19'])(
    'rejects non-integer timestamp %j',
    (ts) => {
      expect(rejection(delivery({ headers: headersAt(ts) })).reason).toBe('invalid_timestamp');
    },
  );

  it('rejects a signature header with only unknown versions', () => {
    const v1 = sign({ secret, id, timestamp, body });
    const headers = { ...headersAt(timestamp), 'hook-signature': v1.replace(/^v1,/, 'v2,') };
    const error = rejection(delivery({ headers }));
    expect(error.reason).toBe('invalid_signature');
  });

  it('rejects a v1 signature of the wrong length without throwing from timingSafeEqual', () => {
    const headers = { ...headersAt(timestamp), 'hook-signature': 'v1,c2hvcnQ= v1,!!!' };
    expect(rejection(delivery({ headers })).reason).toBe('invalid_signature');
  });

  it('accepts when the second of two signatures matches', () => {
    const header = signatureHeader({ secrets: [generateSecret(), secret], id, timestamp, body });
    expect(header.split(' ')).toHaveLength(2);
    const headers = { ...headersAt(timestamp), 'hook-signature': header };
    expect(verifyWebhook(delivery({ headers })).id).toBe(id);
  });

  it('skips unknown versions next to a valid v1 entry', () => {
    const v1 = sign({ secret, id, timestamp, body });
    const headers = { ...headersAt(timestamp), 'hook-signature': `v2,abcdef ${v1} v1a,xyz` };
    expect(verifyWebhook(delivery({ headers })).id).toBe(id);
  });

  it('accepts several secrets on the consumer side (rotation)', () => {
    expect(verifyWebhook(delivery({ secret: [generateSecret(), secret] })).id).toBe(id);
    expect(rejection(delivery({ secret: [generateSecret()] })).reason).toBe('invalid_signature');
  });

  it('rejects a malformed or missing secret', () => {
    expect(rejection(delivery({ secret: 'whsec_???' })).reason).toBe('invalid_secret');
    expect(rejection(delivery({ secret: [] })).reason).toBe('invalid_secret');
  });

  it('accepts a WHATWG Headers object', () => {
    const headers = new Headers(headersAt(timestamp));
    expect(verifyWebhook(delivery({ headers })).id).toBe(id);
  });

  it('accepts node-style headers with mixed-case names and array values', () => {
    const headers = {
      'Hook-Id': id,
      'HOOK-TIMESTAMP': String(timestamp),
      'hook-Signature': ['v1,bm90IGl0', sign({ secret, id, timestamp, body })],
      host: undefined,
    };
    expect(verifyWebhook(delivery({ headers })).id).toBe(id);
  });

  it('accepts signatures Node joined from repeated headers with ", "', () => {
    const header = `v1,bm90IGl0, ${sign({ secret, id, timestamp, body })}`;
    const headers = { ...headersAt(timestamp), 'hook-signature': header };
    expect(verifyWebhook(delivery({ headers })).id).toBe(id);
  });

  it.each([
    ['not JSON', 'hello'],
    ['an array', '[]'],
    ['a missing type', '{"data":{}}'],
    ['a non-string type', '{"type":1,"data":{}}'],
    ['a missing data', '{"type":"user.created"}'],
    ['an array data', '{"type":"user.created","data":[]}'],
    ['a null data', '{"type":"user.created","data":null}'],
  ])('rejects a signed body with %s as invalid_payload', (_label, payload) => {
    const headers = {
      ...headersAt(timestamp),
      'hook-signature': sign({ secret, id, timestamp, body: payload }),
    };
    expect(rejection(delivery({ headers, body: payload })).reason).toBe('invalid_payload');
  });

  it('rejects a signed body that is not UTF-8', () => {
    const bytes = Buffer.from([0x7b, 0xff, 0x7d]);
    const headers = {
      ...headersAt(timestamp),
      'hook-signature': sign({ secret, id, timestamp, body: bytes }),
    };
    expect(rejection(delivery({ headers, body: bytes })).reason).toBe('invalid_payload');
  });

  it('refuses a parsed body with a TypeError that explains the fix', () => {
    const parsed = JSON.parse(body) as unknown as string;
    expect(() => verifyWebhook(delivery({ body: parsed }))).toThrow(/raw request body/);
    expect(() => verifyWebhook(delivery({ body: parsed }))).toThrow(TypeError);
  });
});
