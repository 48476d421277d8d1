import ipaddr, { type IPv4, type IPv6 } from 'ipaddr.js';

/** Why an address is refused as a webhook destination; shown to API users in messages. */
export type BlockReason =
  | 'invalid'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'carrier-grade NAT'
  | 'unspecified'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'unique-local'
  | 'site-local';

/** "a loopback address", "an unspecified address", "a unique-local address"… for messages. */
export function describeBlockReason(reason: BlockReason): string {
  const article = reason === 'invalid' || reason === 'unspecified' ? 'an' : 'a';
  return `${article} ${reason} address`;
}

const IPV4_REASONS: Readonly<Record<string, BlockReason>> = {
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier-grade NAT',
  private: 'private',
};

const IPV6_REASONS: Readonly<Record<string, BlockReason>> = {
  unspecified: 'unspecified',
  linkLocal: 'link-local',
  multicast: 'multicast',
  loopback: 'loopback',
  uniqueLocal: 'unique-local',
  deprecatedSiteLocal: 'site-local',
};

const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

function ipv4Reason(addr: IPv4): BlockReason | null {
  const range = addr.range();
  if (range === 'unicast') return null;
  // Everything else ipaddr knows (documentation, benchmarking, 240/4, AS112, AMT…) is no place
  // a subscriber lives; unknown future range names also land here, failing closed.
  return IPV4_REASONS[range] ?? 'reserved';
}

function ipv4FromParts(high: number, low: number): IPv4 {
  return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
}

/**
 * The IPv4 address a v6 address stands for, for the translation formats where a packet sent
 * to it can end up at that IPv4 host: mapped (::ffff:0:0/96), SIIT (::ffff:0:0:0/96), NAT64
 * well-known prefix (64:ff9b::/96) and 6to4 (2002::/16).
 */
function embeddedIpv4(addr: IPv6): IPv4 | null {
  const p = addr.parts;
  const range = addr.range();
  if (range === 'ipv4Mapped' || range === 'rfc6145' || addr.match(NAT64_WELL_KNOWN)) {
    return ipv4FromParts(p[6] ?? 0, p[7] ?? 0);
  }
  if (range === '6to4') return ipv4FromParts(p[1] ?? 0, p[2] ?? 0);
  return null;
}

function ipv6Reason(addr: IPv6): BlockReason | null {
  const embedded = embeddedIpv4(addr);
  if (embedded) return ipv4Reason(embedded);
  const range = addr.range();
  const known = IPV6_REASONS[range];
  if (known) return known;
  // Only plain global unicast (2000::/3) is allowed. That also refuses the deprecated
  // IPv4-compatible ::a.b.c.d form, Teredo (its IPv4 is obfuscated, so we cannot vet it),
  // local-use NAT64 64:ff9b:1::/48, documentation, ORCHID and unallocated space.
  if (range === 'unicast' && addr.match(GLOBAL_UNICAST)) return null;
  return 'reserved';
}

/**
 * Rewrites a dotted IPv4 tail (`::ffff:127.0.0.1`) as two hex groups (`::ffff:7f00:1`) and
 * returns null when the text is not an IPv6 literal we are willing to read. We do the tail
 * ourselves because ipaddr.js reads the deprecated `::a.b.c.d` as `::ffff:a.b.c.d` and accepts
 * hex/octal/zero-padded tails, whereas the OS would dial something else entirely; the check
 * must see the same address the socket will.
 */
function normaliseIpv6(literal: string): string | null {
  if (!literal.includes(':')) return null;
  const zoneAt = literal.indexOf('%');
  const addr = zoneAt === -1 ? literal : literal.slice(0, zoneAt);
  const zone = zoneAt === -1 ? '' : literal.slice(zoneAt);
  const tailAt = addr.lastIndexOf(':') + 1;
  const tail = addr.slice(tailAt);
  let text = literal;
  if (tail.includes('.')) {
    if (!ipaddr.IPv4.isValidFourPartDecimal(tail)) return null;
    const [a = 0, b = 0, c = 0, d = 0] = ipaddr.IPv4.parse(tail).octets;
    text = `${addr.slice(0, tailAt)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}${zone}`;
  }
  return ipaddr.IPv6.isValid(text) ? text : null;
}

/**
 * Why `ip` must not be connected to, or null if it is an ordinary public address.
 * Accepts an IPv4 dotted quad or an IPv6 literal, optionally in URL brackets (`[::1]`).
 * Anything else — including the legacy IPv4 spellings `127.1`, `0x7f.0.0.1`, `017.0.0.1` or
 * `2130706433`, which different parsers read differently — is 'invalid' and therefore blocked.
 * Callers are expected to pass canonical text from the URL parser or the resolver; refusing the
 * rest means an ambiguity can never be resolved in an attacker's favour.
 */
export function blockedAddressReason(ip: string): BlockReason | null {
  const literal = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  if (ipaddr.IPv4.isValidFourPartDecimal(literal)) return ipv4Reason(ipaddr.IPv4.parse(literal));
  const ipv6 = normaliseIpv6(literal);
  return ipv6 === null ? 'invalid' : ipv6Reason(ipaddr.IPv6.parse(ipv6));
}

/** True unless `ip` is a valid, public unicast address (fails closed on anything unparseable). */
export function isBlockedAddress(ip: string): boolean {
  return blockedAddressReason(ip) !== null;
}
