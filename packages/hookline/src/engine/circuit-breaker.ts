// Endpoint health after a flush of outcomes: failing streaks, the circuit breaker, and disabling
// (docs/architecture.md, "Endpoint health"). An endpoint that has failed without a single success for
// HOOKLINE_CIRCUIT_BREAK_AFTER_MS opens its circuit: its queue is paused until a probe is due, so no
// attempts are spent on it and its backlog, however large, stays out of every claim. When the pause
// ends a claim takes the first few deliveries (the adaptive limit has shrunk by then): that is the
// probe. A success closes the circuit; a failure opens it again for longer. Disabled endpoints'
// queues stop altogether until they are re-enabled.
import type { Queryable } from '../store/db.js';
import { pauseQueues, setQueueActive } from '../store/endpoint-queues.js';
import {
  closeCircuits,
  disableEndpoints,
  markEndpointsFailing,
  markEndpointsHealthy,
  openCircuits,
} from '../store/endpoints.js';

/** An endpoint with no successful delivery for this long is disabled. */
export const DISABLE_FAILING_ENDPOINT_AFTER_MS = 5 * 24 * 60 * 60 * 1000;

export interface HealthInput {
  /** Endpoints with a recorded success in this flush. */
  succeeded: readonly string[];
  /** Of those, the ones that were failing or had an open circuit when claimed: their health is restored. */
  restore: readonly string[];
  /** Endpoints with a recorded failure (other than 410). */
  failing: readonly string[];
  /** Endpoints that answered 410 Gone: they ask not to be called again. */
  gone: readonly string[];
}

export interface HealthChanges {
  closed: string[];
  opened: { id: string; until: number }[];
  disabledGone: string[];
  disabledFailing: string[];
}

/** Records a flush's effect on its endpoints; every statement touches them in id order. */
export async function recordEndpointHealth(
  q: Queryable,
  input: HealthInput,
  now: number,
  breakAfterMs: number,
): Promise<HealthChanges> {
  const restore = [...new Set(input.restore)].sort();
  await markEndpointsHealthy(q, restore);
  const closed = await closeCircuits(q, restore);
  const disabledGone = await disableEndpoints(q, input.gone, 'the endpoint answered 410 Gone', now);
  const succeeded = new Set(input.succeeded);
  const failing = [...new Set(input.failing)].filter((id) => !succeeded.has(id));
  const disabledFailing = await markEndpointsFailing(q, failing, now, DISABLE_FAILING_ENDPOINT_AFTER_MS);
  const opened = await openCircuits(q, failing, now, breakAfterMs);
  await pauseQueues(
    q,
    opened.map((o) => ({ endpoint_id: o.id, until: o.until })),
  );
  return { closed, opened, disabledGone, disabledFailing };
}

/** An endpoint re-enabled or restored starts afresh: circuit closed, its queue running and due now. */
export async function releaseEndpoint(q: Queryable, endpointId: string, now: number): Promise<void> {
  await setQueueActive(q, endpointId, true, now);
  await closeCircuits(q, [endpointId]);
}
