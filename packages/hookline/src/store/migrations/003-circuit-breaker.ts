import type { Dialect } from '../db.js';

export const name = 'endpoint circuit breaker';

// While an endpoint's circuit is open its deliveries wait as `parked`, outside the partial index of
// due deliveries, so a dead endpoint's backlog costs the claims of healthy endpoints nothing.
export function statements(_dialect: Dialect): string[] {
  return [
    'ALTER TABLE endpoints ADD COLUMN circuit_open_until BIGINT',
    `CREATE INDEX endpoints_open_circuits ON endpoints (circuit_open_until) WHERE circuit_open_until IS NOT NULL`,
  ];
}
