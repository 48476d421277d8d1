export {
  blockedAddressReason,
  describeBlockReason,
  isBlockedAddress,
  type BlockReason,
} from './blocked-addresses.js';
export {
  BLOCKED_ADDRESS_ERROR_CODE,
  BlockedAddressError,
  isBlockedAddressError,
} from './blocked-address-error.js';
export {
  DEFAULT_RESOLVE_TIMEOUT_MS,
  MAX_ENDPOINT_URL_LENGTH,
  checkEndpointUrl,
  systemResolve,
  type CheckEndpointUrlOptions,
  type EndpointUrlCheck,
  type Resolve,
} from './endpoint-url.js';
export { assertHostAllowed, createGuardedLookup, type LookupFunction } from './guarded-lookup.js';
export {
  EGRESS_PROXY_ERROR_CODE,
  EgressProxyError,
  egressProxyConnector,
  type EgressProxyOptions,
} from './egress-proxy.js';
export {
  PROXY_FAILURE_PREFIX,
  REFUSAL_REASONS,
  TLS_FAILURE_PREFIX,
  refusalOf,
  type RefusalReason,
} from './refusal-reasons.js';
