// What a span is made of, as the rest of hookline and the SDK set-up (telemetry/sdk.ts) both see it;
// apart from telemetry/tracing.ts so that the SDK module, loaded by it, does not import it back.
import type { Attributes, Span, SpanStatusCode } from '@opentelemetry/api';

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
