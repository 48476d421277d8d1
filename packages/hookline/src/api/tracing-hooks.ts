// A server span per API request (docs/operators.md, "Tracing"), a child of the request's W3C
// `traceparent` when it has one. Registered only when tracing is on: otherwise no hook runs at all.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Context } from '../context.js';
import { SPAN_STATUS_ERROR, type Span } from '../telemetry/tracing.js';

const spans = new WeakMap<FastifyRequest, Span>();

/** The request's server span, when tracing is on: the emit's span is its child. */
export function requestSpan(request: FastifyRequest): Span | null {
  return spans.get(request) ?? null;
}

const header = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

export function registerTracing(app: FastifyInstance, ctx: Context): void {
  if (!ctx.tracing.enabled) return;
  const tracing = ctx.tracing;
  app.addHook('onRequest', async (request) => {
    const route = request.routeOptions.url;
    const queryAt = request.url.indexOf('?');
    // The path only: a query string may carry anything a client put in it.
    const path = queryAt < 0 ? request.url : request.url.slice(0, queryAt);
    spans.set(
      request,
      tracing.startServerSpan(
        route ? `${request.method} ${route}` : request.method,
        header(request.headers.traceparent),
        header(request.headers.tracestate),
        {
          'http.request.method': request.method,
          'url.path': path,
          ...(route ? { 'http.route': route } : {}),
        },
      ),
    );
  });
  app.addHook('onResponse', async (request, reply) => {
    const span = spans.get(request);
    if (!span) return;
    spans.delete(request);
    span.setAttribute('http.response.status_code', reply.statusCode);
    if (reply.statusCode >= 500) span.setStatus({ code: SPAN_STATUS_ERROR });
    span.end();
  });
}
