import {
  createPublicKey,
  generateKeyPairSync,
  sign as cryptoSign,
  verify as cryptoVerify,
} from 'node:crypto';
import { describe, it, expect } from 'vitest';
import {
  decodePrivateKey,
  derivePublicKey,
  generateEd25519KeyPair,
  generateSecret,
  sign,
  signatureHeader,
  signV1a,
  verifyWebhook,
  WebhookVerificationError,
  type VerifyWebhookInput,
} from '../src/index.js';
import vectors from './vectors.json' with { type: 'json' };

const { privateKey, publicKey } = generateEd25519KeyPair();
const other = generateEd25519KeyPair();
const secret = generateSecret();
const nowMs = 1_795_312_345_678;
const timestamp = Math.floor(nowMs / 1000);
const id = 'msg_2fV1aTest';
const body = '{"type":"user.created","data":{"userId":"user_29w"}}';

function headers(signature: string, ts: number | string = timestamp, hookId = id): Record<string, string> {
  return { 'hook-id': hookId, 'hook-timestamp': String(ts), 'hook-signature': signature };
}

function delivery(overrides: Partial<VerifyWebhookInput> = {}): VerifyWebhookInput {
  return {
    publicKey,
    headers: headers(signV1a({ privateKey, id, timestamp, body })),
    body,
    now: nowMs,
    ...overrides,
  };
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

/** A whsk_/whpk_ key made from a raw 32-byte seed, as any other implementation would store it. */
function keyFromSeed(seed: Buffer): string {
  return 'whsk_' + seed.toString('base64');
}

describe('v1a shared vectors', () => {
  it.each(vectors.v1a)('signV1a() reproduces "$name"', (vector) => {
    const { id: hookId, timestamp: ts, body: raw } = vector;
    expect(signV1a({ privateKey: vector.privateKey, id: hookId, timestamp: ts, body: raw })).toBe(
      vector.signature,
    );
    expect(
      signV1a({ privateKey: vector.privateKey, id: hookId, timestamp: ts, body: Buffer.from(raw) }),
    ).toBe(vector.signature);
    expect(derivePublicKey(vector.privateKey)).toBe(vector.publicKey);
  });

  it.each(vectors.v1a)('verifyWebhook({ publicKey }) accepts "$name"', (vector) => {
    const input = {
      publicKey: vector.publicKey,
      headers: headers(vector.signature, vector.timestamp, vector.id),
      body: vector.body,
      now: vector.timestamp * 1000,
    };
    // The reference vector's body is not a hookline event, so only its signature can pass.
    if (vector.body.includes('"type"')) expect(verifyWebhook(input).id).toBe(vector.id);
    else expect(rejection(input).reason).toBe('invalid_payload');
  });

  it.each(vectors.headers)('signatureHeader() reproduces "$name"', (vector) => {
    const { keys, id: hookId, timestamp: ts, body: raw } = vector;
    expect(signatureHeader({ secrets: keys, id: hookId, timestamp: ts, body: raw })).toBe(vector.header);
  });

  it.each(vectors.headers)('"$name" verifies with each of its keys alone', (vector) => {
    const base = { headers: headers(vector.header, vector.timestamp, vector.id), body: vector.body };
    const now = vector.timestamp * 1000;
    for (const key of vector.keys) {
      const input = key.startsWith('whsk_')
        ? { ...base, now, publicKey: derivePublicKey(key) }
        : { ...base, now, secret: key };
      expect(verifyWebhook(input).id).toBe(vector.id);
    }
    const stranger = { ...base, now, publicKey: other.publicKey };
    expect(rejection(stranger).reason).toBe('invalid_signature');
  });
});

describe('Ed25519 keys', () => {
  it('generates whsk_ + base64 of a 32-byte seed and whpk_ + base64 of 32 public-key bytes', () => {
    const pair = generateEd25519KeyPair();
    expect(pair.privateKey).toMatch(/^whsk_[A-Za-z0-9+/]{43}=$/);
    expect(pair.publicKey).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    expect(derivePublicKey(pair.privateKey)).toBe(pair.publicKey);
    expect(generateEd25519KeyPair().privateKey).not.toBe(pair.privateKey);
  });

  it('accepts the private key without its prefix and in the 64-byte seed-then-public form', () => {
    const seed = Buffer.from(privateKey.slice('whsk_'.length), 'base64');
    const pub = Buffer.from(publicKey.slice('whpk_'.length), 'base64');
    const message = { id, timestamp, body };
    const expected = signV1a({ privateKey, ...message });
    expect(signV1a({ privateKey: seed.toString('base64'), ...message })).toBe(expected);
    const long = keyFromSeed(Buffer.concat([seed, pub]));
    expect(signV1a({ privateKey: long, ...message })).toBe(expected);
    expect(derivePublicKey(long)).toBe(publicKey);
  });

  it('refuses a 64-byte private key whose public half does not match its seed', () => {
    const seed = Buffer.from(privateKey.slice('whsk_'.length), 'base64');
    const wrongPub = Buffer.from(other.publicKey.slice('whpk_'.length), 'base64');
    expect(() => decodePrivateKey(keyFromSeed(Buffer.concat([seed, wrongPub])))).toThrow(
      expect.objectContaining({ reason: 'invalid_private_key' }),
    );
  });

  it.each(['', 'whsk_', 'whsk_not base64!', 'whsk_abc$def', keyFromSeed(Buffer.alloc(31, 1))])(
    'refuses private key %j',
    (bad) => {
      expect(() => signV1a({ privateKey: bad, id, timestamp, body })).toThrow(
        expect.objectContaining({ reason: 'invalid_private_key' }),
      );
      expect(() => signatureHeader({ secrets: [bad || 'whsk_'], id, timestamp, body })).toThrow(
        WebhookVerificationError,
      );
    },
  );

  it.each([
    ['a whsec_ secret', () => generateSecret(), /secret/],
    ['a whsk_ private key', () => privateKey, /public_key/],
    ['31 bytes', () => 'whpk_' + Buffer.alloc(31, 1).toString('base64'), /32 raw/],
    ['64 bytes', () => 'whpk_' + Buffer.alloc(64, 1).toString('base64'), /32 raw/],
    ['junk', () => 'whpk_$$$', /32 raw/],
    ['nothing', () => 'whpk_', /32 raw/],
  ])('refuses as publicKey %s with a message that says what to pass', (_label, make, message) => {
    const error = rejection(delivery({ publicKey: make() }));
    expect(error.reason).toBe('invalid_public_key');
    expect(error.message).toMatch(message);
  });

  it('refuses an empty list of public keys, and a public key that is not a string', () => {
    expect(rejection(delivery({ publicKey: [] })).reason).toBe('invalid_public_key');
    const untyped = rejection(delivery({ publicKey: null as unknown as string }));
    expect(untyped.reason).toBe('invalid_public_key');
    expect(untyped.message).toMatch(/must be a string/);
  });

  it('accepts a public key without its whpk_ prefix', () => {
    expect(verifyWebhook(delivery({ publicKey: publicKey.slice('whpk_'.length) })).id).toBe(id);
  });
});

describe('verifyWebhook with publicKey', () => {
  it('accepts a valid delivery and returns the parsed event', () => {
    expect(verifyWebhook(delivery())).toEqual({
      id,
      timestamp,
      type: 'user.created',
      data: { userId: 'user_29w' },
    });
  });

  it('rejects a tampered body', () => {
    expect(rejection(delivery({ body: body.replace('user_29w', 'user_evil') })).reason).toBe(
      'invalid_signature',
    );
  });

  it('rejects a tampered hook-id', () => {
    const signed = signV1a({ privateKey, id, timestamp, body });
    expect(rejection(delivery({ headers: headers(signed, timestamp, 'msg_other') })).reason).toBe(
      'invalid_signature',
    );
  });

  it('rejects a tampered hook-timestamp inside the window', () => {
    const signed = signV1a({ privateKey, id, timestamp, body });
    expect(rejection(delivery({ headers: headers(signed, timestamp - 10) })).reason).toBe(
      'invalid_signature',
    );
  });

  it('rejects a signature by another key', () => {
    expect(rejection(delivery({ publicKey: other.publicKey })).reason).toBe('invalid_signature');
  });

  it('rejects more than 5 minutes old or ahead, accepts exactly 5 minutes', () => {
    const at = (ts: number) =>
      delivery({ headers: headers(signV1a({ privateKey, id, timestamp: ts, body }), ts) });
    expect(rejection(at(timestamp - 301)).reason).toBe('timestamp_too_old');
    expect(rejection(at(timestamp + 301)).reason).toBe('timestamp_too_new');
    expect(verifyWebhook(at(timestamp - 300)).id).toBe(id);
    expect(verifyWebhook(at(timestamp + 300)).id).toBe(id);
    expect(rejection({ ...at(timestamp - 60), toleranceSeconds: 30 }).reason).toBe('timestamp_too_old');
  });

  it('accepts when the second of two v1a signatures matches (rotation grace)', () => {
    const header = signatureHeader({ secrets: [other.privateKey, privateKey], id, timestamp, body });
    expect(header.split(' ')).toHaveLength(2);
    expect(verifyWebhook(delivery({ headers: headers(header) })).id).toBe(id);
  });

  it('accepts several public keys on the consumer side', () => {
    expect(verifyWebhook(delivery({ publicKey: [other.publicKey, publicKey] })).id).toBe(id);
  });

  it('verifies a scheme-switching header "v1a,<new> v1,<old>" with either key, each against its own entry', () => {
    const header = signatureHeader({ secrets: [privateKey, secret], id, timestamp, body });
    expect(header).toMatch(/^v1a,\S+ v1,\S+$/);
    expect(verifyWebhook(delivery({ headers: headers(header) })).id).toBe(id);
    expect(verifyWebhook(delivery({ headers: headers(header), publicKey: undefined, secret })).id).toBe(id);
    // With the other scheme's entry alone, neither key passes.
    const [v1a, v1] = header.split(' ') as [string, string];
    expect(rejection(delivery({ headers: headers(v1) })).reason).toBe('invalid_signature');
    const withSecret = delivery({ headers: headers(v1a), publicKey: undefined, secret });
    expect(rejection(withSecret).reason).toBe('invalid_signature');
  });

  it('says which key to use when the header carries only the other scheme', () => {
    const v1Only = rejection(delivery({ headers: headers(sign({ secret, id, timestamp, body })) }));
    expect(v1Only.reason).toBe('invalid_signature');
    expect(v1Only.message).toMatch(/no v1a signature.*secret/);
    const v1aOnly = rejection(delivery({ publicKey: undefined, secret }));
    expect(v1aOnly.message).toMatch(/no v1 signature.*publicKey/);
  });

  it('does not accept an Ed25519 signature labelled v1', () => {
    const signature = signV1a({ privateKey, id, timestamp, body }).replace(/^v1a,/, 'v1,');
    expect(rejection(delivery({ headers: headers(signature) })).reason).toBe('invalid_signature');
  });

  it.each([
    ['an empty entry', 'v1a,'],
    ['junk', 'v1a,!!!'],
    ['a short signature', 'v1a,c2hvcnQ='],
    ['no comma', 'v1a'],
    ['another version', 'v2a,AAAA'],
  ])('rejects %s as invalid_signature', (_label, signature) => {
    expect(rejection(delivery({ headers: headers(signature) })).reason).toBe('invalid_signature');
  });

  it('rejects a signature with one bit flipped or one byte short', () => {
    const bytes = Buffer.from(signV1a({ privateKey, id, timestamp, body }).slice(4), 'base64');
    const flipped = Buffer.from(bytes);
    flipped[10]! ^= 1;
    expect(rejection(delivery({ headers: headers(`v1a,${flipped.toString('base64')}`) })).reason).toBe(
      'invalid_signature',
    );
    const short = bytes.subarray(0, 63).toString('base64');
    expect(rejection(delivery({ headers: headers(`v1a,${short}`) })).reason).toBe('invalid_signature');
  });

  it('refuses a header stuffed with more than 10 v1a entries, even with a valid one among them', () => {
    const valid = signV1a({ privateKey, id, timestamp, body });
    const stuffed = [...Array.from({ length: 10 }, () => 'v1a,AAAA'), valid].join(' ');
    const error = rejection(delivery({ headers: headers(stuffed) }));
    expect(error.reason).toBe('invalid_signature');
    expect(error.message).toMatch(/more than 10/);
    const ten = [...Array.from({ length: 9 }, () => 'v1a,AAAA'), valid].join(' ');
    expect(verifyWebhook(delivery({ headers: headers(ten) })).id).toBe(id);
  });

  it('checks headers and timestamp as for secrets', () => {
    const signed = signV1a({ privateKey, id, timestamp, body });
    const missing = { 'hook-id': id, 'hook-signature': signed };
    expect(rejection(delivery({ headers: missing })).reason).toBe('missing_header');
    expect(rejection(delivery({ headers: headers(signed, '1.5e9') })).reason).toBe('invalid_timestamp');
    expect(verifyWebhook(delivery({ headers: new Headers(headers(signed)) })).id).toBe(id);
  });

  it('refuses both or neither of secret and publicKey with a TypeError', () => {
    expect(() => verifyWebhook(delivery({ secret }))).toThrow(/not both/);
    expect(() => verifyWebhook(delivery({ secret }))).toThrow(TypeError);
    expect(() => verifyWebhook(delivery({ publicKey: undefined }))).toThrow(/secret .* or publicKey/);
    expect(() => verifyWebhook(delivery({ publicKey: undefined }))).toThrow(TypeError);
  });
});

describe('interoperability with plain node:crypto', () => {
  /** A verifier written with node:crypto alone, as a subscriber without this library would. */
  function plainVerifyV1a(
    whpk: string,
    hookId: string,
    ts: string,
    signatureHeaderValue: string,
    raw: Buffer,
  ) {
    const key = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(whpk.slice(5), 'base64').toString('base64url') },
      format: 'jwk',
    });
    const content = Buffer.concat([Buffer.from(`${hookId}.${ts}.`), raw]);
    return signatureHeaderValue
      .split(' ')
      .filter((entry) => entry.startsWith('v1a,'))
      .some((entry) => cryptoVerify(null, content, key, Buffer.from(entry.slice(4), 'base64')));
  }

  it("verifies the library's v1a header, and refuses it tampered", () => {
    const raw = Buffer.from(body);
    const header = signatureHeader({ secrets: [privateKey, secret], id, timestamp, body: raw });
    expect(plainVerifyV1a(publicKey, id, String(timestamp), header, raw)).toBe(true);
    expect(plainVerifyV1a(publicKey, id, String(timestamp), header, Buffer.from(body + ' '))).toBe(false);
    expect(plainVerifyV1a(publicKey, id, String(timestamp + 1), header, raw)).toBe(false);
    expect(plainVerifyV1a(other.publicKey, id, String(timestamp), header, raw)).toBe(false);
  });

  it.each(vectors.v1a)('verifies shared vector "$name"', (vector) => {
    const { publicKey: whpk, id: hookId, timestamp: ts, signature, body: raw } = vector;
    expect(plainVerifyV1a(whpk, hookId, String(ts), signature, Buffer.from(raw))).toBe(true);
  });

  it('the library verifies a delivery signed with node:crypto alone, and signs it identically', () => {
    const keys = generateKeyPairSync('ed25519');
    const jwk = keys.privateKey.export({ format: 'jwk' });
    const whpk = 'whpk_' + Buffer.from(jwk.x!, 'base64url').toString('base64');
    const whsk = 'whsk_' + Buffer.from(jwk.d!, 'base64url').toString('base64');
    const signature = cryptoSign(null, Buffer.from(`${id}.${timestamp}.${body}`), keys.privateKey);
    const header = `v1a,${signature.toString('base64')}`;
    expect(verifyWebhook(delivery({ publicKey: whpk, headers: headers(header) })).id).toBe(id);
    expect(signV1a({ privateKey: whsk, id, timestamp, body })).toBe(header);
    expect(derivePublicKey(whsk)).toBe(whpk);
    expect(rejection(delivery({ publicKey: whpk, headers: headers(header), body: `${body} ` })).reason).toBe(
      'invalid_signature',
    );
  });
});
