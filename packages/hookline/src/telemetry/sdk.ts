// The OpenTelemetry SDK, loaded by telemetry/tracing.ts only when an OTLP endpoint is configured.
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context as OtelContext,
  type Span,
  type TextMapGetter,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { TracingConfig } from '../config.js';
import type { FinishedSpan, Tracing } from './spans.js';

function sampler(config: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerRatio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

async function exporter(config: TracingConfig): Promise<SpanExporter> {
  const { OTLPTraceExporter } =
    config.protocol === 'http/json'
      ? await import('@opentelemetry/exporter-trace-otlp-http')
      : await import('@opentelemetry/exporter-trace-otlp-proto');
  return new OTLPTraceExporter({ url: config.tracesUrl });
}

type Carrier = Record<string, string | undefined>;
const getter: TextMapGetter<Carrier> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};

export async function startSdk(config: TracingConfig): Promise<Tracing> {
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName }),
    sampler: sampler(config),
    spanProcessors: [new BatchSpanProcessor(await exporter(config))],
  });
  const tracer = provider.getTracer('hookline');
  const propagator = new W3CTraceContextPropagator();
  const parentOf = (traceparent: string | null | undefined, tracestate?: string): OtelContext =>
    traceparent ? propagator.extract(ROOT_CONTEXT, { traceparent, tracestate }, getter) : ROOT_CONTEXT;
  return {
    enabled: true,
    startServerSpan: (name, traceparent, tracestate, attributes) =>
      tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parentOf(traceparent, tracestate)),
    startSpan: (name: string, parent: Span | null, attributes?: Attributes) =>
      tracer.startSpan(name, { attributes }, parent ? trace.setSpan(ROOT_CONTEXT, parent) : ROOT_CONTEXT),
    traceparentOf(span) {
      const carrier: Carrier = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, {
        set: (c, key, value) => (c[key] = value),
      });
      return carrier.traceparent ?? null;
    },
    record({ name, parent, startMs, endMs, attributes, error }: FinishedSpan) {
      const span = tracer.startSpan(name, { attributes, startTime: startMs }, parentOf(parent));
      if (error) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end(endMs);
    },
    // A collector that is down must not fail hookline's shutdown: those spans are lost, nothing else.
    shutdown: () => provider.shutdown().catch(() => {}),
  };
}
