// The circuit breaker. An endpoint that has failed without a single success for
// HOOKLINE_CIRCUIT_BREAK_AFTER_MS opens its circuit: its waiting deliveries are parked, outside the
// index claims read, and new ones are parked as they are fanned out. So a dead endpoint's backlog,
// however large, costs nothing to the claims serving healthy endpoints, and no attempts are spent on
// it. Now and then a probe returns its oldest few deliveries to the queue: a success closes the
// circuit and releases everything, a failure opens it again for longer. Disabled endpoints park
// their deliveries the same way until they are re-enabled.
import type { Context } from '../context.js';
import type { Queryable } from '../store/db.js';
import { parkPending, sweepStrays, unpark } from '../store/deliveries.js';
import { closeCircuits, getFailingSince, openCircuit, takeCircuitsToProbe } from '../store/endpoints.js';

/** The pause before the next probe grows with the outage: a quarter of it, within bounds. */
export function probeDelay(failingForMs: number, breakAfterMs: number): number {
  return Math.min(breakAfterMs * 60, Math.max(breakAfterMs / 6, failingForMs / 4));
}

/**
 * After a failed attempt was recorded: opens (or keeps open) the circuit of a long-failing endpoint;
 * for a disabled endpoint, parks what waits for it.
 */
export async function afterFailure(
  q: Queryable,
  endpointId: string,
  now: number,
  breakAfterMs: number,
): Promise<'opened' | 'open' | 'closed'> {
  const endpoint = await getFailingSince(q, endpointId);
  if (endpoint?.status === 'disabled') {
    await parkPending(q, endpointId, now);
    return 'open';
  }
  if (!endpoint || endpoint.status !== 'active' || endpoint.failing_since === null) return 'closed';
  const failingFor = now - Number(endpoint.failing_since);
  if (failingFor < breakAfterMs) return 'closed';
  await openCircuit(q, endpointId, now + probeDelay(failingFor, breakAfterMs));
  await parkPending(q, endpointId, now);
  return endpoint.circuit_open_until === null ? 'opened' : 'open';
}

/** After successes were recorded: their endpoints' circuits close and parked deliveries return. */
export async function afterSuccess(
  q: Queryable,
  endpointIds: readonly string[],
  now: number,
): Promise<string[]> {
  const closed = await closeCircuits(q, endpointIds);
  for (const id of closed) await unpark(q, id, now);
  return closed;
}

/** An endpoint re-enabled or restored starts afresh: circuit closed, everything parked released. */
export async function releaseEndpoint(q: Queryable, endpointId: string, now: number): Promise<void> {
  await closeCircuits(q, [endpointId]);
  await unpark(q, endpointId, now);
}

/**
 * Half-opens the circuits due for a probe: the oldest `probeSize` parked deliveries of each go back to
 * the queue; the probe window keeps other workers from probing the same endpoint meanwhile.
 */
export async function probeOpenCircuits(
  ctx: Context,
  probeSize: number,
  probeWindowMs: number,
): Promise<number> {
  const now = ctx.clock();
  return ctx.db.transaction(async (tx) => {
    await sweepStrays(tx, now);
    const endpoints = await takeCircuitsToProbe(tx, now, now + probeWindowMs);
    let released = 0;
    for (const id of endpoints) released += await unpark(tx, id, now, probeSize);
    return released;
  });
}
