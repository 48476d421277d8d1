import dns, { type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { BlockedAddressError } from './blocked-address-error.js';
import { blockedAddressReason } from './blocked-addresses.js';

export type { LookupFunction };

function notFound(hostname: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
  err.code = 'ENOTFOUND';
  err.syscall = 'getaddrinfo';
  return err;
}

function toRecords(result: string | LookupAddress[], family: number | undefined): LookupAddress[] {
  if (typeof result !== 'string') return result;
  return result === '' ? [] : [{ address: result, family: family ?? isIP(result) }];
}

/**
 * A `lookup` for net.connect / tls.connect / http.request that refuses to hand
 * out non-public addresses (docs/contract.md §3), in the style of Svix's resolver-level filtering.
 * Checking here, on the very addresses the socket is about to dial, closes the DNS-rebinding
 * gap that a check at endpoint-creation time leaves open.
 *
 * The base resolver is always asked for every record, and the lookup fails if ANY of them is
 * blocked — even when the caller wants a single address. Filtering out the bad records instead
 * would let a name that alternates between a public and a private record (or a happy-eyeballs
 * fallback) reach the private one; a host with mixed records is suspicious enough to refuse.
 *
 * With `allowPrivateNetworks` the base lookup is returned unchanged.
 */
export function createGuardedLookup(
  allowPrivateNetworks: boolean,
  baseLookup: LookupFunction = dns.lookup,
): LookupFunction {
  if (allowPrivateNetworks) return baseLookup;
  return (hostname, options, callback) => {
    const wantAll = options.all === true;
    baseLookup(hostname, { ...options, all: true }, (err, result, family) => {
      if (err) {
        callback(err, wantAll ? [] : '');
        return;
      }
      const records = toRecords(result, family);
      const first = records[0];
      if (first === undefined) {
        callback(notFound(hostname), wantAll ? [] : '');
        return;
      }
      for (const { address } of records) {
        const reason = blockedAddressReason(address);
        if (reason !== null) {
          callback(new BlockedAddressError(hostname, address, reason), wantAll ? [] : '');
          return;
        }
      }
      if (wantAll) callback(null, records);
      else callback(null, first.address, first.family);
    });
  };
}

/**
 * Throws BlockedAddressError if `hostname` is a non-public IP literal. Node's net.connect skips
 * `lookup` entirely for IP literals, so the sender must call this itself before connecting when
 * private networks are disallowed. Names (including numeric oddities like `127.1` that are not
 * IP literals to Node) are left to the guarded lookup, which sees what they resolve to.
 */
export function assertHostAllowed(hostname: string): void {
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  if (isIP(bare) === 0) return;
  const reason = blockedAddressReason(bare);
  if (reason !== null) throw new BlockedAddressError(bare, bare, reason);
}
