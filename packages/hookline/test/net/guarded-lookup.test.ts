import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LookupAddress, LookupOptions } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  BLOCKED_ADDRESS_ERROR_CODE,
  BlockedAddressError,
  assertHostAllowed,
  createGuardedLookup,
  isBlockedAddressError,
  type LookupFunction,
} from '../../src/net/index.js';

const HINT = 'set HOOKLINE_ALLOW_PRIVATE_NETWORKS=true to allow it';

const v4 = (address: string): LookupAddress => ({ address, family: 4 });
const v6 = (address: string): LookupAddress => ({ address, family: 6 });

const DNS: Record<string, LookupAddress[]> = {
  'public.example.com': [v4('93.184.216.34')],
  'dual.example.com': [v6('2606:2800:220:1:248:1893:25c8:1946'), v4('93.184.216.34')],
  'internal.example.com': [v4('10.0.0.5')],
  'public-first.example.com': [v4('93.184.216.34'), v4('127.0.0.1')],
  'private-first.example.com': [v4('192.168.1.10'), v4('93.184.216.34')],
  'ula.example.com': [v6('2606:4700:4700::1111'), v6('fd00::1')],
  'mapped.example.com': [v6('::ffff:127.0.0.1')],
  'metadata.example.com': [v4('169.254.169.254')],
  'garbage.example.com': [v4('not-an-ip')],
  'empty.example.com': [],
};

/** Behaves like dns.lookup over a fixed table, honouring `all`. */
function fakeLookup(table: Record<string, LookupAddress[]>) {
  return vi.fn<LookupFunction>((hostname, options, callback) => {
    const records = table[hostname];
    setImmediate(() => {
      if (records === undefined) {
        const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
        err.code = 'ENOTFOUND';
        callback(err, options.all ? [] : '');
      } else if (options.all) callback(null, records);
      else callback(null, records[0]?.address ?? '', records[0]?.family);
    });
  });
}

/** A resolver that ignores `all` and always answers in the single-address shape. */
function singleShapeLookup(address: string, family: number): LookupFunction {
  return (_hostname, _options, callback) => callback(null, address, family);
}

interface Answer {
  err: NodeJS.ErrnoException | null;
  address: string | LookupAddress[];
  family: number | undefined;
}

function run(lookup: LookupFunction, hostname: string, options: LookupOptions): Promise<Answer> {
  return new Promise((done) =>
    lookup(hostname, options, (err, address, family) => done({ err, address, family })),
  );
}

describe('createGuardedLookup(false): allowed hosts', () => {
  it.each([
    ['public.example.com', false, '93.184.216.34', 4],
    ['public.example.com', true, [v4('93.184.216.34')], undefined],
    ['dual.example.com', false, '2606:2800:220:1:248:1893:25c8:1946', 6],
    ['dual.example.com', true, DNS['dual.example.com'], undefined],
  ] as const)('%s with all=%s', async (host, all, address, family) => {
    const answer = await run(createGuardedLookup(false, fakeLookup(DNS)), host, { all });
    expect(answer).toEqual({ err: null, address, family });
  });
});

describe('createGuardedLookup(false): blocked hosts fail with the coded error, in both shapes', () => {
  const cases = [
    ['internal.example.com', '10.0.0.5', 'private'],
    ['public-first.example.com', '127.0.0.1', 'loopback'],
    ['private-first.example.com', '192.168.1.10', 'private'],
    ['ula.example.com', 'fd00::1', 'unique-local'],
    ['mapped.example.com', '::ffff:127.0.0.1', 'loopback'],
    ['metadata.example.com', '169.254.169.254', 'link-local'],
    ['garbage.example.com', 'not-an-ip', 'invalid'],
  ] as const;
  const withShapes = cases.flatMap((c) => [[...c, false] as const, [...c, true] as const]);

  it.each(withShapes)('%s (%s, %s) all=%s', async (host, address, reason, all) => {
    const { err } = await run(createGuardedLookup(false, fakeLookup(DNS)), host, { all });
    expect(err).toBeInstanceOf(BlockedAddressError);
    expect(err).toMatchObject({ code: BLOCKED_ADDRESS_ERROR_CODE, hostname: host, address, reason });
    const article = reason === 'invalid' ? 'an' : 'a';
    expect(err?.message).toBe(
      `refusing to connect to ${host}: it resolves to ${article} ${reason} address (${address}); ${HINT}`,
    );
  });
});

describe('createGuardedLookup(false): resolver behaviour', () => {
  it.each([false, true])('passes resolver errors through unchanged (all=%s)', async (all) => {
    const { err } = await run(createGuardedLookup(false, fakeLookup(DNS)), 'nowhere.example.com', { all });
    expect(err?.code).toBe('ENOTFOUND');
    expect(isBlockedAddressError(err)).toBe(false);
  });

  it.each([false, true])('turns an empty answer into ENOTFOUND (all=%s)', async (all) => {
    const { err } = await run(createGuardedLookup(false, fakeLookup(DNS)), 'empty.example.com', { all });
    expect(err).toMatchObject({ code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND empty.example.com' });
  });

  it('always asks the base resolver for every record, keeping the other options', async () => {
    const base = fakeLookup(DNS);
    await run(createGuardedLookup(false, base), 'public.example.com', { family: 4, hints: 32 });
    expect(base).toHaveBeenCalledTimes(1);
    expect(base.mock.calls[0]?.[1]).toEqual({ family: 4, hints: 32, all: true });
  });

  it.each([
    ['93.184.216.34', 4, false, { err: null, address: '93.184.216.34', family: 4 }],
    ['93.184.216.34', 4, true, { err: null, address: [v4('93.184.216.34')], family: undefined }],
    [
      '2606:4700:4700::1111',
      6,
      true,
      { err: null, address: [v6('2606:4700:4700::1111')], family: undefined },
    ],
  ] as const)(
    'copes with a resolver answering %s in the single shape (all=%s)',
    async (ip, fam, all, expected) => {
      expect(await run(createGuardedLookup(false, singleShapeLookup(ip, fam)), 'h.example', { all })).toEqual(
        expected,
      );
    },
  );

  it.each([false, true])('still blocks a single-shape private answer (all=%s)', async (all) => {
    const { err } = await run(createGuardedLookup(false, singleShapeLookup('10.1.2.3', 4)), 'h.example', {
      all,
    });
    expect(err).toMatchObject({ code: BLOCKED_ADDRESS_ERROR_CODE, address: '10.1.2.3', reason: 'private' });
  });
});

describe('createGuardedLookup(true)', () => {
  it('is the base lookup itself', () => {
    const base = fakeLookup(DNS);
    expect(createGuardedLookup(true, base)).toBe(base);
  });

  it.each([
    ['internal.example.com', false, '10.0.0.5', 4],
    ['public-first.example.com', true, DNS['public-first.example.com'], undefined],
  ] as const)('lets %s through (all=%s)', async (host, all, address, family) => {
    expect(await run(createGuardedLookup(true, fakeLookup(DNS)), host, { all })).toEqual({
      err: null,
      address,
      family,
    });
  });
});

describe('assertHostAllowed', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1', 'loopback'],
    ['10.0.0.1', '10.0.0.1', 'private'],
    ['169.254.169.254', '169.254.169.254', 'link-local'],
    ['0.0.0.0', '0.0.0.0', 'unspecified'],
    ['::1', '::1', 'loopback'],
    ['[::1]', '::1', 'loopback'],
    ['::ffff:127.0.0.1', '::ffff:127.0.0.1', 'loopback'],
    ['[::ffff:7f00:1]', '::ffff:7f00:1', 'loopback'],
    ['fe80::1%eth0', 'fe80::1%eth0', 'link-local'],
    ['fd00::1', 'fd00::1', 'unique-local'],
  ] as const)('throws for %s', (host, address, reason) => {
    let thrown: unknown;
    try {
      assertHostAllowed(host);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(BlockedAddressError);
    expect(thrown).toMatchObject({ code: BLOCKED_ADDRESS_ERROR_CODE, hostname: address, address, reason });
    expect((thrown as Error).message).toBe(
      `refusing to connect to ${address}: it is a${reason === 'unspecified' ? 'n' : ''} ${reason} address; ${HINT}`,
    );
  });

  // Names (even numeric-looking ones Node does not treat as IP literals) go through the lookup.
  it.each(['8.8.8.8', '2606:4700:4700::1111', '[2606:4700:4700::1111]', 'example.com', 'localhost', '127.1'])(
    'leaves %s alone',
    (host) => {
      expect(() => assertHostAllowed(host)).not.toThrow();
    },
  );
});

describe('isBlockedAddressError', () => {
  const blocked = new BlockedAddressError('h', '10.0.0.1', 'private');
  const coded = Object.assign(new Error('x'), { code: BLOCKED_ADDRESS_ERROR_CODE });
  it.each([
    ['the error itself', blocked, true],
    ['any error with the code', coded, true],
    ['fetch-style wrapping', new TypeError('fetch failed', { cause: blocked }), true],
    ['doubly wrapped', new Error('a', { cause: new Error('b', { cause: blocked }) }), true],
    ['ECONNREFUSED', Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }), false],
    [
      'wrapped ECONNREFUSED',
      new Error('a', { cause: Object.assign(new Error('r'), { code: 'ECONNREFUSED' }) }),
      false,
    ],
    ['a plain object with the code', { code: BLOCKED_ADDRESS_ERROR_CODE }, false],
    ['null', null, false],
    ['a string', BLOCKED_ADDRESS_ERROR_CODE, false],
  ] as const)('%s -> %s', (_label, err, expected) => {
    expect(isBlockedAddressError(err)).toBe(expected);
  });
});

describe('with a real socket', () => {
  let server: http.Server;
  let port: number;

  beforeAll(async () => {
    server = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise<void>((closed) => server.close(() => closed()));
  });

  function get(options: http.RequestOptions): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = http.request({ host: 'localhost', port, agent: false, ...options }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve(body));
      });
      req.on('error', reject);
      req.end();
    });
  }

  // family: 4 makes net ask lookup for one address; autoSelectFamily makes it ask for all.
  const shapes = [
    ['a single address', { family: 4 }, false],
    ['all addresses', { autoSelectFamily: true }, true],
  ] as const;

  it.each(shapes)(
    'refuses localhost when private networks are disallowed (%s)',
    async (_label, shape, all) => {
      const lookup = vi.fn(createGuardedLookup(false));
      const err: unknown = await get({ ...shape, lookup }).catch((e: unknown) => e);
      expect(lookup.mock.calls[0]?.[1].all ?? false).toBe(all);
      expect(err).toBeInstanceOf(Error);
      expect(err).toMatchObject({
        code: BLOCKED_ADDRESS_ERROR_CODE,
        hostname: 'localhost',
        reason: 'loopback',
      });
      expect(isBlockedAddressError(err)).toBe(true);
    },
  );

  it.each(shapes)('connects when private networks are allowed (%s)', async (_label, shape) => {
    expect(await get({ ...shape, lookup: createGuardedLookup(true) })).toBe('ok');
  });

  it('Node skips lookup for IP-literal hosts, which is why assertHostAllowed exists', async () => {
    const lookup = vi.fn(createGuardedLookup(false));
    expect(await get({ host: '127.0.0.1', lookup })).toBe('ok');
    expect(lookup).not.toHaveBeenCalled();
    expect(() => assertHostAllowed('127.0.0.1')).toThrow(BlockedAddressError);
  });
});
