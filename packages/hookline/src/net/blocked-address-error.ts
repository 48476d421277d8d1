import { describeBlockReason, type BlockReason } from './blocked-addresses.js';

export const BLOCKED_ADDRESS_ERROR_CODE = 'ERR_HOOKLINE_BLOCKED_ADDRESS';

/**
 * Raised at connect time when a delivery would reach a non-public address. It carries a Node
 * style `code` so it travels through net, tls and http like any other connect error and the
 * sender can tell a policy refusal from a subscriber that is merely down.
 */
export class BlockedAddressError extends Error {
  readonly code = BLOCKED_ADDRESS_ERROR_CODE;
  readonly hostname: string;
  readonly address: string;
  readonly reason: BlockReason;

  constructor(hostname: string, address: string, reason: BlockReason) {
    const what =
      hostname === address
        ? `it is ${describeBlockReason(reason)}`
        : `it resolves to ${describeBlockReason(reason)} (${address})`;
    super(
      `refusing to connect to ${hostname}: ${what}; set HOOKLINE_ALLOW_PRIVATE_NETWORKS=true to allow it`,
    );
    this.name = 'BlockedAddressError';
    this.hostname = hostname;
    this.address = address;
    this.reason = reason;
  }
}

/**
 * True if `err`, or any error in its `cause` chain, is a blocked-address refusal. HTTP clients
 * such as fetch wrap connect errors (`TypeError: fetch failed` with a `cause`), so looking at
 * the top-level error alone would misclassify the refusal as an ordinary network failure.
 */
export function isBlockedAddressError(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if ((current as { code?: unknown }).code === BLOCKED_ADDRESS_ERROR_CODE) return true;
    current = current.cause;
  }
  return false;
}
