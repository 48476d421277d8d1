import { describe, expect, it } from 'vitest';
import {
  blockedAddressReason,
  describeBlockReason,
  isBlockedAddress,
  type BlockReason,
} from '../../src/net/index.js';

const ALLOWED = [
  '8.8.8.8',
  '1.1.1.1',
  '93.184.216.34',
  '100.63.255.255', // just below CGNAT
  '100.128.0.0', // just above CGNAT
  '172.15.255.255', // just below 172.16/12
  '172.32.0.0', // just above 172.16/12
  '192.167.255.255',
  '192.169.0.0',
  '169.253.255.255',
  '126.255.255.255',
  '128.0.0.1',
  '11.0.0.0',
  '9.255.255.255',
  '223.255.255.255', // just below multicast
  '2606:4700:4700::1111',
  '2001:4860:4860::8888',
  '2a00:1450:4001:81c::200e',
  '2606:4700:4700:0:0:0:0:1111',
  '[2606:4700:4700::1111]',
  '[8.8.8.8]', // bracket stripping is lenient; the content decides
  '::ffff:8.8.8.8',
  '::ffff:808:808',
  '64:ff9b::8.8.8.8', // NAT64 of a public address
  '64:ff9b::808:808',
  '2002:808:808::1', // 6to4 of 8.8.8.8
  '::ffff:0:8.8.8.8', // SIIT of a public address
];

const BLOCKED: [string, BlockReason][] = [
  // IPv4 loopback 127/8
  ['127.0.0.1', 'loopback'],
  ['127.0.0.0', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['127.1.2.3', 'loopback'],
  // RFC 1918
  ['10.0.0.0', 'private'],
  ['10.0.0.5', 'private'],
  ['10.255.255.255', 'private'],
  ['172.16.0.0', 'private'],
  ['172.20.10.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.0.1', 'private'],
  ['192.168.255.255', 'private'],
  // link-local, including the cloud metadata address
  ['169.254.169.254', 'link-local'],
  ['169.254.0.1', 'link-local'],
  // CGNAT 100.64/10
  ['100.64.0.0', 'carrier-grade NAT'],
  ['100.100.100.200', 'carrier-grade NAT'],
  ['100.127.255.255', 'carrier-grade NAT'],
  // unspecified 0/8
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  // multicast 224/4
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  // broadcast and reserved 240/4
  ['255.255.255.255', 'broadcast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.254', 'reserved'],
  // documentation, benchmarking, IETF protocol assignments
  ['192.0.2.1', 'reserved'],
  ['198.51.100.7', 'reserved'],
  ['203.0.113.9', 'reserved'],
  ['198.18.0.1', 'reserved'],
  ['198.19.255.255', 'reserved'],
  ['192.0.0.8', 'reserved'],
  // IPv6 loopback / unspecified
  ['::1', 'loopback'],
  ['0:0:0:0:0:0:0:1', 'loopback'],
  ['[::1]', 'loopback'],
  ['::', 'unspecified'],
  ['[::]', 'unspecified'],
  // link-local fe80::/10, with and without zone
  ['fe80::1', 'link-local'],
  ['febf:ffff::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['fe80::1%25eth0', 'link-local'],
  // site-local fec0::/10
  ['fec0::1', 'site-local'],
  // unique-local fc00::/7
  ['fc00::1', 'unique-local'],
  ['fd12:3456:789a::1', 'unique-local'],
  ['FD00::1', 'unique-local'],
  // multicast ff00::/8
  ['ff02::1', 'multicast'],
  ['ff05::1:3', 'multicast'],
  // IPv4-mapped: the embedded IPv4 decides
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::FFFF:7F00:0001', 'loopback'],
  ['0:0:0:0:0:ffff:10.0.0.1', 'private'],
  ['0:0:0:0:0:ffff:a00:1', 'private'],
  ['::ffff:169.254.169.254', 'link-local'],
  ['::ffff:192.168.1.1', 'private'],
  ['::ffff:100.64.0.1', 'carrier-grade NAT'],
  ['::ffff:0.0.0.0', 'unspecified'],
  ['::ffff:224.0.0.1', 'multicast'],
  ['[::ffff:127.0.0.1]', 'loopback'],
  // SIIT ::ffff:0:a.b.c.d
  ['::ffff:0:127.0.0.1', 'loopback'],
  ['::ffff:0:a00:1', 'private'],
  // NAT64 well-known prefix 64:ff9b::/96
  ['64:ff9b::127.0.0.1', 'loopback'],
  ['64:ff9b::a00:5', 'private'],
  ['64:ff9b::169.254.169.254', 'link-local'],
  // local-use NAT64 64:ff9b:1::/48 leads into a private network by definition
  ['64:ff9b:1::808:808', 'reserved'],
  // 6to4 2002::/16
  ['2002:7f00:1::', 'loopback'],
  ['2002:a00:1::1', 'private'],
  ['2002:c0a8:101::1', 'private'],
  ['2002:a9fe:a9fe::', 'link-local'],
  // IPv4-compatible ::a.b.c.d (deprecated) is refused outright
  ['::127.0.0.1', 'reserved'],
  ['::7f00:1', 'reserved'],
  ['::8.8.8.8', 'reserved'],
  // …and dotted tails are read the way inet_pton reads them, not as mapped addresses
  ['::0.0.0.1', 'loopback'],
  ['::0.0.0.0', 'unspecified'],
  // Teredo, documentation, benchmarking, ORCHID, discard, unallocated
  ['2001::1', 'reserved'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'reserved'],
  ['2001:db8::1', 'reserved'],
  ['3fff::1', 'reserved'],
  ['2001:2::1', 'reserved'],
  ['2001:10::1', 'reserved'],
  ['2001:20::1', 'reserved'],
  ['100::1', 'reserved'],
  ['4000::1', 'reserved'],
  ['1::1', 'reserved'],
  ['5f00::1', 'reserved'],
];

const INVALID = [
  '',
  ' ',
  'localhost',
  'example.com',
  '8.8.8.8 ',
  ' 8.8.8.8',
  '8.8.8.8\n',
  '256.0.0.1',
  '1.2.3',
  '1.2.3.4.5',
  '127.1',
  '2130706433',
  '0x7f000001',
  '0x7f.0.0.1',
  '0177.0.0.1',
  '010.0.0.1',
  '08.8.8.8',
  '127.000.0.1',
  '8.8.8.8/32',
  '8.8.8.8:80',
  '::1/128',
  '[::1',
  '::1]',
  '[[::1]]',
  ':::1',
  '1:2:3:4:5:6:7:8:9',
  'gggg::1',
  '::ffff:0x7f.0.0.1',
  '::ffff:127.000.0.1',
  '::ffff:010.0.0.1',
  '::ffff:1.2.3',
  '[::1]:80',
];

describe('isBlockedAddress: public unicast addresses are allowed', () => {
  it.each(ALLOWED)('%s', (ip) => {
    expect(blockedAddressReason(ip)).toBeNull();
    expect(isBlockedAddress(ip)).toBe(false);
  });
});

describe('isBlockedAddress: non-public addresses are blocked', () => {
  it.each(BLOCKED)('%s (%s)', (ip, reason) => {
    expect(blockedAddressReason(ip)).toBe(reason);
    expect(isBlockedAddress(ip)).toBe(true);
  });
});

describe('isBlockedAddress: anything that is not a canonical IP literal fails closed', () => {
  it.each(INVALID)('%j', (ip) => {
    expect(blockedAddressReason(ip)).toBe('invalid');
    expect(isBlockedAddress(ip)).toBe(true);
  });
});

describe('describeBlockReason', () => {
  it.each([
    ['loopback', 'a loopback address'],
    ['private', 'a private address'],
    ['link-local', 'a link-local address'],
    ['carrier-grade NAT', 'a carrier-grade NAT address'],
    ['unspecified', 'an unspecified address'],
    ['multicast', 'a multicast address'],
    ['broadcast', 'a broadcast address'],
    ['reserved', 'a reserved address'],
    ['unique-local', 'a unique-local address'],
    ['site-local', 'a site-local address'],
    ['invalid', 'an invalid address'],
  ] satisfies [BlockReason, string][])('%s -> %s', (reason, text) => {
    expect(describeBlockReason(reason)).toBe(text);
  });
});
