import { describe, expect, it, vi } from 'vitest';
import { checkEndpointUrl, MAX_ENDPOINT_URL_LENGTH, type Resolve } from '../../src/net/index.js';

const HINT = 'set HOOKLINE_ALLOW_PRIVATE_NETWORKS=true to allow it';

/** A resolver backed by a fixed table; unknown names fail like getaddrinfo does. */
function fakeResolve(table: Record<string, string[]>): Resolve & ReturnType<typeof vi.fn> {
  return vi.fn(async (host: string) => {
    const found = table[host];
    if (found === undefined)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found;
  });
}

const DNS: Record<string, string[]> = {
  'hooks.example.com': ['93.184.216.34'],
  'example.com.': ['93.184.216.34'],
  'dual.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
  'internal.example.com': ['10.0.0.5'],
  'mixed.example.com': ['93.184.216.34', '10.0.0.5'],
  'mixed6.example.com': ['2606:4700:4700::1111', 'fd00::1'],
  'rebind.example.com': ['127.0.0.1'],
  'metadata.example.com': ['169.254.169.254'],
  'mapped.example.com': ['::ffff:127.0.0.1'],
  'cgnat.example.com': ['100.64.1.1'],
  'zero.example.com': ['0.0.0.0'],
  'ula.example.com': ['fd12::1'],
  'empty.example.com': [],
  'garbage.example.com': ['not-an-ip'],
  'xn--bcher-kva.example': ['93.184.216.34'],
};

const strict = { allowPrivateNetworks: false, resolve: fakeResolve(DNS) };
const relaxed = { allowPrivateNetworks: true, resolve: fakeResolve(DNS) };

describe('checkEndpointUrl: accepted', () => {
  it.each([
    ['https://hooks.example.com/webhooks', 'https://hooks.example.com/webhooks'],
    ['https://hooks.example.com:8443/a/b?x=1#frag', 'https://hooks.example.com:8443/a/b?x=1#frag'],
    ['HTTPS://HOOKS.EXAMPLE.COM/Path', 'https://hooks.example.com/Path'],
    ['https://dual.example.com/', 'https://dual.example.com/'],
    ['https://example.com./', 'https://example.com./'],
    ['https://bücher.example/', 'https://xn--bcher-kva.example/'],
    ['https://8.8.8.8/', 'https://8.8.8.8/'],
    ['https://[2606:4700:4700::1111]/', 'https://[2606:4700:4700::1111]/'],
    ['https://[::ffff:8.8.8.8]/', 'https://[::ffff:808:808]/'],
    ['https://134744072/', 'https://8.8.8.8/'],
    // DNS failures, empty answers and unknown names are accepted; the connect-time guard decides later
    ['https://not-yet-registered.example.com/', 'https://not-yet-registered.example.com/'],
    ['https://empty.example.com/', 'https://empty.example.com/'],
    [
      `https://hooks.example.com/${'a'.repeat(MAX_ENDPOINT_URL_LENGTH - 'https://hooks.example.com/'.length)}`,
      null,
    ],
  ])('%s', async (raw, href) => {
    const result = await checkEndpointUrl(raw, strict);
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.url.href).toBe(href ?? raw);
  });
});

type Refusal = [raw: string, code: 'invalid_url' | 'url_not_allowed', message: string];

const SCHEME_RULE =
  'url must be an absolute https:// URL (plain http:// only when HOOKLINE_ALLOW_PRIVATE_NETWORKS=true)';

const INVALID: Refusal[] = [
  ['', 'invalid_url', 'url must be an absolute URL, such as https://example.com/webhooks'],
  [
    'hooks.example.com/webhooks',
    'invalid_url',
    'url must be an absolute URL, such as https://example.com/webhooks',
  ],
  ['/webhooks', 'invalid_url', 'url must be an absolute URL, such as https://example.com/webhooks'],
  [
    '//hooks.example.com/',
    'invalid_url',
    'url must be an absolute URL, such as https://example.com/webhooks',
  ],
  ['https://', 'invalid_url', 'url must be an absolute URL, such as https://example.com/webhooks'],
  [
    'https://exa mple.com/',
    'invalid_url',
    'url must be an absolute URL, such as https://example.com/webhooks',
  ],
  [
    'https://hooks.example.com:99999/',
    'invalid_url',
    'url must be an absolute URL, such as https://example.com/webhooks',
  ],
  ['https://999.1.1.1/', 'invalid_url', 'url must be an absolute URL, such as https://example.com/webhooks'],
  [
    `https://hooks.example.com/${'a'.repeat(MAX_ENDPOINT_URL_LENGTH)}`,
    'invalid_url',
    'url must be at most 2048 characters',
  ],
  [' https://hooks.example.com/', 'invalid_url', 'url must not start or end with whitespace'],
  ['https://hooks.example.com/\n', 'invalid_url', 'url must not start or end with whitespace'],
  ['https://hooks.exam\tple.com/', 'invalid_url', 'url must not contain control characters'],
  ['https://hooks.example.com/\u0000', 'invalid_url', 'url must not contain control characters'],
  ['ftp://hooks.example.com/', 'invalid_url', SCHEME_RULE],
  ['ws://hooks.example.com/', 'invalid_url', SCHEME_RULE],
  ['file:///etc/passwd', 'invalid_url', SCHEME_RULE],
  ['javascript:alert(1)', 'invalid_url', SCHEME_RULE],
  ['data:text/plain,hi', 'invalid_url', SCHEME_RULE],
  ['mailto:ops@example.com', 'invalid_url', SCHEME_RULE],
  ['https://user@hooks.example.com/', 'invalid_url', 'url must not contain a username or password'],
  ['https://user:secret@hooks.example.com/', 'invalid_url', 'url must not contain a username or password'],
  ['https://:secret@hooks.example.com/', 'invalid_url', 'url must not contain a username or password'],
];

const NOT_ALLOWED: Refusal[] = [
  ['http://hooks.example.com/', 'url_not_allowed', SCHEME_RULE],
  // IP literals, including spellings the URL parser normalises
  ['https://127.0.0.1/', 'url_not_allowed', `url points to a loopback address (127.0.0.1); ${HINT}`],
  ['https://2130706433/', 'url_not_allowed', `url points to a loopback address (127.0.0.1); ${HINT}`],
  ['https://0x7f.1/', 'url_not_allowed', `url points to a loopback address (127.0.0.1); ${HINT}`],
  ['https://0177.0.0.1/', 'url_not_allowed', `url points to a loopback address (127.0.0.1); ${HINT}`],
  ['https://127.1/', 'url_not_allowed', `url points to a loopback address (127.0.0.1); ${HINT}`],
  ['https://0/', 'url_not_allowed', `url points to an unspecified address (0.0.0.0); ${HINT}`],
  ['https://10.0.0.5:8443/hook', 'url_not_allowed', `url points to a private address (10.0.0.5); ${HINT}`],
  ['https://192.168.1.1/', 'url_not_allowed', `url points to a private address (192.168.1.1); ${HINT}`],
  ['https://172.16.0.1/', 'url_not_allowed', `url points to a private address (172.16.0.1); ${HINT}`],
  [
    'https://169.254.169.254/latest/meta-data/',
    'url_not_allowed',
    `url points to a link-local address (169.254.169.254); ${HINT}`,
  ],
  [
    'https://100.64.0.1/',
    'url_not_allowed',
    `url points to a carrier-grade NAT address (100.64.0.1); ${HINT}`,
  ],
  ['https://224.0.0.1/', 'url_not_allowed', `url points to a multicast address (224.0.0.1); ${HINT}`],
  [
    'https://255.255.255.255/',
    'url_not_allowed',
    `url points to a broadcast address (255.255.255.255); ${HINT}`,
  ],
  ['https://[::1]/', 'url_not_allowed', `url points to a loopback address (::1); ${HINT}`],
  ['https://[::]/', 'url_not_allowed', `url points to an unspecified address (::); ${HINT}`],
  [
    'https://[::ffff:127.0.0.1]/',
    'url_not_allowed',
    `url points to a loopback address (::ffff:7f00:1); ${HINT}`,
  ],
  [
    'https://[::ffff:7f00:1]/',
    'url_not_allowed',
    `url points to a loopback address (::ffff:7f00:1); ${HINT}`,
  ],
  [
    'https://[0:0:0:0:0:ffff:10.0.0.1]/',
    'url_not_allowed',
    `url points to a private address (::ffff:a00:1); ${HINT}`,
  ],
  ['https://[fe80::1]/', 'url_not_allowed', `url points to a link-local address (fe80::1); ${HINT}`],
  ['https://[fd00::1]/', 'url_not_allowed', `url points to a unique-local address (fd00::1); ${HINT}`],
  [
    'https://[64:ff9b::a00:1]/',
    'url_not_allowed',
    `url points to a private address (64:ff9b::a00:1); ${HINT}`,
  ],
  [
    'https://[2002:7f00:1::]/',
    'url_not_allowed',
    `url points to a loopback address (2002:7f00:1::); ${HINT}`,
  ],
  // localhost names are refused without asking DNS
  ['https://localhost/', 'url_not_allowed', `url points to localhost, a loopback address; ${HINT}`],
  ['https://LOCALHOST:3000/x', 'url_not_allowed', `url points to localhost, a loopback address; ${HINT}`],
  ['https://localhost./', 'url_not_allowed', `url points to localhost, a loopback address; ${HINT}`],
  ['https://api.localhost/', 'url_not_allowed', `url points to localhost, a loopback address; ${HINT}`],
  ['https://a.b.localhost./', 'url_not_allowed', `url points to localhost, a loopback address; ${HINT}`],
  ['https://%6c%6fcalhost/', 'url_not_allowed', `url points to localhost, a loopback address; ${HINT}`],
  ['https://ｌｏｃａｌｈｏｓｔ/', 'url_not_allowed', `url points to localhost, a loopback address; ${HINT}`],
  // names resolving to non-public addresses; one bad record is enough
  [
    'https://internal.example.com/',
    'url_not_allowed',
    `url resolves to a private address (10.0.0.5); ${HINT}`,
  ],
  ['https://mixed.example.com/', 'url_not_allowed', `url resolves to a private address (10.0.0.5); ${HINT}`],
  [
    'https://mixed6.example.com/',
    'url_not_allowed',
    `url resolves to a unique-local address (fd00::1); ${HINT}`,
  ],
  [
    'https://rebind.example.com/',
    'url_not_allowed',
    `url resolves to a loopback address (127.0.0.1); ${HINT}`,
  ],
  [
    'https://metadata.example.com/',
    'url_not_allowed',
    `url resolves to a link-local address (169.254.169.254); ${HINT}`,
  ],
  [
    'https://mapped.example.com/',
    'url_not_allowed',
    `url resolves to a loopback address (::ffff:127.0.0.1); ${HINT}`,
  ],
  [
    'https://cgnat.example.com/',
    'url_not_allowed',
    `url resolves to a carrier-grade NAT address (100.64.1.1); ${HINT}`,
  ],
  [
    'https://zero.example.com/',
    'url_not_allowed',
    `url resolves to an unspecified address (0.0.0.0); ${HINT}`,
  ],
  [
    'https://ula.example.com/',
    'url_not_allowed',
    `url resolves to a unique-local address (fd12::1); ${HINT}`,
  ],
  [
    'https://garbage.example.com/',
    'url_not_allowed',
    `url resolves to an invalid address (not-an-ip); ${HINT}`,
  ],
];

describe('checkEndpointUrl: refused with private networks disallowed', () => {
  it.each([...INVALID, ...NOT_ALLOWED])('%s -> %s', async (raw, code, message) => {
    expect(await checkEndpointUrl(raw, strict)).toEqual({ ok: false, code, message });
  });
});

describe('checkEndpointUrl: with private networks allowed', () => {
  it.each(INVALID)('%s is still invalid', async (raw, code, message) => {
    expect(await checkEndpointUrl(raw, relaxed)).toEqual({ ok: false, code, message });
  });

  it.each(NOT_ALLOWED.map(([raw]) => raw))('%s is accepted', async (raw) => {
    const result = await checkEndpointUrl(raw, relaxed);
    expect(result.ok).toBe(true);
  });

  it('does not resolve at all', async () => {
    const resolve = fakeResolve(DNS);
    await checkEndpointUrl('https://internal.example.com/', { allowPrivateNetworks: true, resolve });
    expect(resolve).not.toHaveBeenCalled();
  });
});

describe('checkEndpointUrl: resolution', () => {
  it.each([
    ['https://hooks.example.com/', ['hooks.example.com']],
    ['https://bücher.example/', ['xn--bcher-kva.example']],
    ['https://example.com./', ['example.com.']],
    ['https://8.8.8.8/', []],
    ['https://[2606:4700:4700::1111]/', []],
    ['https://localhost/', []],
    ['https://api.localhost/', []],
    ['http://hooks.example.com/', []],
    ['https://user@hooks.example.com/', []],
  ])('%s resolves %j', async (raw, expected) => {
    const resolve = fakeResolve(DNS);
    await checkEndpointUrl(raw, { allowPrivateNetworks: false, resolve });
    expect(resolve.mock.calls.map(([host]) => host)).toEqual(expected);
  });

  it.each([
    ['ENOTFOUND', () => Promise.reject(Object.assign(new Error('nope'), { code: 'ENOTFOUND' }))],
    ['EAI_AGAIN', () => Promise.reject(Object.assign(new Error('try again'), { code: 'EAI_AGAIN' }))],
    [
      'a synchronous throw',
      () => {
        throw new Error('resolver bug');
      },
    ],
  ] as const)('accepts the URL when resolution fails with %s', async (_label, resolve) => {
    const result = await checkEndpointUrl('https://hooks.example.com/', {
      allowPrivateNetworks: false,
      resolve,
    });
    expect(result.ok).toBe(true);
  });

  it('accepts the URL when resolution does not answer in time', async () => {
    let asked = 0;
    const resolve: Resolve = () => {
      asked++;
      return new Promise(() => {});
    };
    // The check returns at all (the resolver never answers), and it did ask the resolver.
    const result = await checkEndpointUrl('https://hooks.example.com/', {
      allowPrivateNetworks: false,
      resolve,
      resolveTimeoutMs: 20,
    });
    expect(result.ok).toBe(true);
    expect(asked).toBe(1);
  });

  it('refuses localhost with the real resolver, without consulting DNS', async () => {
    expect(await checkEndpointUrl('https://localhost:8080/hook', { allowPrivateNetworks: false })).toEqual({
      ok: false,
      code: 'url_not_allowed',
      message: `url points to localhost, a loopback address; ${HINT}`,
    });
  });
});
