// Attempts that never reached the subscriber because hookline, or its egress proxy, would not make
// the connection (docs/operators.md, "Refused connections"): an operator is told of these, since a
// tenant cannot see them and they do not mend by themselves. Read from the reason the sender wrote
// (delivery/sender.ts, describeFailure), in hookline's own words.
import { BLOCKED_ADDRESS_ERROR_CODE } from './blocked-address-error.js';

/** `ssrf`: the address is private (checked at connect); `tls`: the TLS handshake or certificate failed; `proxy`: the egress proxy refused or could not be reached. */
export type RefusalReason = 'ssrf' | 'tls' | 'proxy';

export const REFUSAL_REASONS: readonly RefusalReason[] = ['ssrf', 'tls', 'proxy'];

/** How a TLS failure's reason starts (delivery/sender.ts). */
export const TLS_FAILURE_PREFIX = 'TLS: ';
/** How an egress proxy failure's reason starts (net/egress-proxy.ts). */
export const PROXY_FAILURE_PREFIX = 'egress proxy: ';
const SSRF_PREFIX = `${BLOCKED_ADDRESS_ERROR_CODE}: `;

/** Which refusal a failed attempt's reason is, if any. */
export function refusalOf(error: string | null): RefusalReason | null {
  if (error === null) return null;
  if (error.startsWith(SSRF_PREFIX)) return 'ssrf';
  if (error.startsWith(TLS_FAILURE_PREFIX)) return 'tls';
  if (error.startsWith(PROXY_FAILURE_PREFIX)) return 'proxy';
  return null;
}
