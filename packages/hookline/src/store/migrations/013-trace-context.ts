import type { Dialect } from '../db.js';

export const name = 'trace context of a message';

export function statements(_dialect: Dialect): string[] {
  // The W3C `traceparent` of the emit that created the message, when tracing is on: every attempt of
  // its deliveries, whichever worker makes it and however much later, is a span in that trace
  // (docs/operators.md, "Tracing"). Null without tracing.
  return ['ALTER TABLE messages ADD COLUMN trace_context TEXT'];
}
