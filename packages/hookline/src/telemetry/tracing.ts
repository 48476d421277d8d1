// Tracing (docs/operators.md, "Tracing"): all OpenTelemetry set-up is behind this one interface. With
// no OTLP endpoint configured, NO_TRACING is used: `enabled` is false, every caller tests that one
// boolean before making anything for a span, and the SDK (telemetry/sdk.ts) is never imported, so no
// OpenTelemetry code is even loaded. Only types come from @opentelemetry/api here.
import type { Attributes, Span, SpanStatusCode } from '@opentelemetry/api';
import type { TracingConfig } from '../config.js';

export type { Span } from '@opentelemetry/api';

/** SpanStatusCode.ERROR as a plain value: importing the enum would load @opentelemetry/api. */
export const SPAN_STATUS_ERROR = 2 as SpanStatusCode.ERROR;

/** A span recorded after the fact, with the times its work began and ended (epoch ms). */
export interface FinishedSpan {
  name: string;
  /** The W3C `traceparent` of its parent (stored with the message), or null for a new trace. */
  parent: string | null;
  startMs: number;
  endMs: number;
  attributes: Attributes;
  error: boolean;
}

export interface Tracing {
  readonly enabled: boolean;
  /** A server span for an API request, a child of its `traceparent` (and `tracestate`) headers, if any. */
  startServerSpan(
    name: string,
    traceparent: string | undefined,
    tracestate: string | undefined,
    attributes: Attributes,
  ): Span;
  /** A span under `parent` (a new trace when null), running now. */
  startSpan(name: string, parent: Span | null, attributes?: Attributes): Span;
  /** The W3C `traceparent` that makes later spans (another thread, process or day) children of `span`. */
  traceparentOf(span: Span): string | null;
  record(span: FinishedSpan): void;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

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
