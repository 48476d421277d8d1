import { promises as dnsPromises } from 'node:dns';
import { isIP } from 'node:net';
import { blockedAddressReason, describeBlockReason } from './blocked-addresses.js';

export const MAX_ENDPOINT_URL_LENGTH = 2048;

/** Default wait for create-time DNS before giving up and accepting (see checkEndpointUrl). */
export const DEFAULT_RESOLVE_TIMEOUT_MS = 3000;

export type Resolve = (host: string) => Promise<string[]>;

export interface CheckEndpointUrlOptions {
  allowPrivateNetworks: boolean;
  /** Host → addresses. Defaults to the system resolver; tests inject a fake. */
  resolve?: Resolve;
  resolveTimeoutMs?: number;
}

export type EndpointUrlCheck =
  { ok: true; url: URL } | { ok: false; code: 'invalid_url' | 'url_not_allowed'; message: string };

const ALLOW_HINT = 'set HOOKLINE_ALLOW_PRIVATE_NETWORKS=true to allow it';
// One sentence for any other scheme and for http:// while private networks are refused: true either way.
const SCHEME_RULE =
  'url must be an absolute https:// URL (plain http:// only when HOOKLINE_ALLOW_PRIVATE_NETWORKS=true)';

export const systemResolve: Resolve = async (host) => {
  // verbatim: keep the resolver's order and every record; we vet all of them anyway.
  const records = await dnsPromises.lookup(host, { all: true, verbatim: true });
  return records.map((r) => r.address);
};

function invalid(message: string): EndpointUrlCheck {
  return { ok: false, code: 'invalid_url', message };
}

function notAllowed(message: string): EndpointUrlCheck {
  return { ok: false, code: 'url_not_allowed', message };
}

function hasControlCharacter(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

function isLocalhostName(hostname: string): boolean {
  // RFC 6761: localhost and everything under it is loopback whatever DNS says. A single
  // trailing dot is the same name in absolute form.
  const name = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  return name === 'localhost' || name.endsWith('.localhost');
}

/** Resolves, but gives up (returns null) on any error or after `timeoutMs`. */
async function tryResolve(resolve: Resolve, host: string, timeoutMs: number): Promise<string[] | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((done) => {
    timer = setTimeout(() => done(null), timeoutMs);
    timer.unref();
  });
  try {
    // Wrapped so a resolver that throws synchronously counts as a failed lookup too.
    const answer = (async () => resolve(host))().catch(() => null);
    return await Promise.race([answer, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Validates a webhook endpoint URL at create/update time (docs/contract.md §3, §4.1).
 *
 * With private networks disallowed, IP-literal hosts are vetted directly, `localhost` names are
 * refused outright, and other names are resolved and refused if ANY address is non-public (a
 * name with one public and one private record would otherwise reach the private one on some
 * attempts). When resolution fails or times out the URL is accepted: a subscriber may create
 * the endpoint before its DNS exists, and the API must not hang on or depend on DNS. That is
 * safe because this is only a courtesy check — DNS can change after creation anyway, so the
 * sender's connect-time guard (guarded-lookup.ts) is what actually enforces the policy.
 */
export async function checkEndpointUrl(
  raw: string,
  opts: CheckEndpointUrlOptions,
): Promise<EndpointUrlCheck> {
  if (raw.length > MAX_ENDPOINT_URL_LENGTH) {
    return invalid(`url must be at most ${MAX_ENDPOINT_URL_LENGTH} characters`);
  }
  // The URL parser silently drops surrounding whitespace and any tab or newline; refusing them
  // keeps what the user sent and what we store the same.
  if (raw !== raw.trim()) return invalid('url must not start or end with whitespace');
  if (hasControlCharacter(raw)) return invalid('url must not contain control characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return invalid('url must be an absolute URL, such as https://example.com/webhooks');
  }
  if (url.protocol === 'http:') {
    if (!opts.allowPrivateNetworks) return notAllowed(SCHEME_RULE);
  } else if (url.protocol !== 'https:') {
    return invalid(SCHEME_RULE);
  }
  if (url.username !== '' || url.password !== '') {
    return invalid('url must not contain a username or password');
  }
  if (url.hostname === '') return invalid('url must include a host');
  if (opts.allowPrivateNetworks) return { ok: true, url };

  const host = url.hostname;
  const bare = host.startsWith('[') ? host.slice(1, -1) : host;
  if (isIP(bare) !== 0) {
    // WHATWG parsing has already turned odd IPv4 spellings (2130706433, 0x7f.1, 0177.0.0.1)
    // into a dotted quad, so the check below sees the address that would really be dialled.
    const reason = blockedAddressReason(bare);
    return reason === null
      ? { ok: true, url }
      : notAllowed(`url points to ${describeBlockReason(reason)} (${bare}); ${ALLOW_HINT}`);
  }
  if (isLocalhostName(host)) {
    return notAllowed(`url points to localhost, a loopback address; ${ALLOW_HINT}`);
  }
  const addresses = await tryResolve(
    opts.resolve ?? systemResolve,
    host,
    opts.resolveTimeoutMs ?? DEFAULT_RESOLVE_TIMEOUT_MS,
  );
  for (const address of addresses ?? []) {
    const reason = blockedAddressReason(address);
    if (reason !== null) {
      return notAllowed(`url resolves to ${describeBlockReason(reason)} (${address}); ${ALLOW_HINT}`);
    }
  }
  return { ok: true, url };
}
