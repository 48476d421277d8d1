// Tracing (docs/operators.md, "Tracing"): all OpenTelemetry set-up is behind this one interface. With
// no OTLP endpoint configured, NO_TRACING is used: `enabled` is false, every caller tests that one
// boolean before making anything for a span, and the SDK (telemetry/sdk.ts) is never imported, so no
// OpenTelemetry code is even loaded. Only types come from @opentelemetry/api here.
import type { TracingConfig } from '../config.js';
import type { Tracing } from './spans.js';

export { SPAN_STATUS_ERROR, type FinishedSpan, type Span, type Tracing } from './spans.js';

const noop = () => {
  throw new Error('tracing is off: test tracing.enabled first');
};

export const NO_TRACING: Tracing = Object.freeze({
  enabled: false,
  startServerSpan: noop,
  startSpan: noop,
  traceparentOf: noop,
  record: noop,
  shutdown: async () => {},
});

let sdkLoads = 0;

/** How many times this process loaded the SDK: tests check that none is loaded without an endpoint. */
export function sdkLoadCount(): number {
  return sdkLoads;
}

/**
 * Each thread that makes spans starts its own (the API thread and the delivery thread): a span
 * processor and an exporter per thread keep spans off the message port between threads, and the
 * SDK's batching does the same work in either (docs/operators.md, "Tracing").
 */
export async function startTracing(config: TracingConfig | null): Promise<Tracing> {
  if (config === null) return NO_TRACING;
  sdkLoads++;
  const { startSdk } = await import('./sdk.js');
  return startSdk(config);
}
