// How a worker's claims are shaped: the lease each takes, and the ceiling no endpoint's adaptive limit
// goes above. The claim loop (delivery/worker.ts) and a flush that claims with its outcomes
// (engine/outcomes.ts) ask for work the same way.
import type { Context } from '../context.js';
import type { ClaimOptions } from '../store/attempts.js';

/**
 * How long a claim is protected: the attempt's time-out plus slack for recording the outcome, at most
 * 30 s of it (docs/contract.md §6). A lease that runs out early costs at worst a duplicate
 * attempt (fencing keeps the outcomes straight), so the slack shrinks with short time-outs and crashed
 * work returns sooner.
 */
export function leaseMs(deliveryTimeoutMs: number): number {
  return deliveryTimeoutMs + Math.min(30_000, Math.max(5_000, deliveryTimeoutMs));
}

/** A claim of up to `limit` deliveries at `now`, leased for an attempt's time-out and its slack. */
export function claimOptions(ctx: Context, now: number, limit: number): ClaimOptions {
  return {
    now,
    leaseUntil: now + leaseMs(ctx.config.deliveryTimeoutMs),
    limit,
    ceiling: ctx.config.endpointConcurrency,
  };
}
