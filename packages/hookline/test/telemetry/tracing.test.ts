// OpenTelemetry traces (docs/operators.md, "Tracing"), received by an OTLP receiver written here (a
// plain node:http server taking the http/json protocol on /v1/traces): the API request's span is a
// child of the incoming `traceparent`, the emit's span a child of the request's, and every attempt of
// a retried delivery is a span in the emit's trace, with its number and outcome. Without an endpoint
// nothing is sent and the SDK is never loaded: that describe runs first, before any service of this
// file has loaded it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sdkLoadCount, startTracing } from '../../src/telemetry/tracing.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';

const INCOMING_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const INCOMING_SPAN = '00f067aa0ba902b7';

describe.each(STORE_KINDS)('tracing off on %s', (kind) => {
  let otlp: OtlpReceiver;
  let subscriber: Receiver;
  let t: TestService;

  beforeAll(async () => {
    otlp = await startOtlpReceiver();
    subscriber = await startReceiver();
    // The protocol and the service name alone turn nothing on: only an endpoint does.
    t = await startTestService(kind, {
      worker: true,
      env: { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'not-exported' },
    });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await subscriber?.close();
    await otlp?.close();
  });

  it('sends nothing, stores no trace context and never loads the SDK', async () => {
    await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: subscriber.url, events: ['*'] });
    const emitted = await t.inject({
      method: 'POST',
      url: '/v1/events',
      headers: {
        authorization: `Bearer ${t.keys.producer}`,
        traceparent: `00-${INCOMING_TRACE}-${INCOMING_SPAN}-01`,
      },
      payload: { tenant_id: 'acme', type: 'user.created', data: { userId: 'user_1' } },
    });
    expect(emitted.statusCode).toBe(202);
    await subscriber.waitFor(1, 30_000);
    const row = await t.service.ctx.db.one<{ trace_context: string | null }>(
      'SELECT trace_context FROM messages WHERE id = $1',
      [emitted.json().id],
    );
    expect(row).toEqual({ trace_context: null });
    await t.close();
    expect(t.service.ctx.tracing.enabled).toBe(false);
    expect(subscriber.requests[0]!.headers.traceparent).toBeUndefined();
    expect(otlp.posts).toBe(0);
    expect(sdkLoadCount()).toBe(0);
  }, 60_000);
});

describe.each(STORE_KINDS)('tracing to an OTLP receiver on %s', (kind) => {
  let otlp: OtlpReceiver;
  let subscriber: Receiver;
  let t: TestService;

  beforeAll(async () => {
    otlp = await startOtlpReceiver();
    // The first attempt fails, the retry succeeds.
    subscriber = await startReceiver((_request, index) => ({ status: index === 0 ? 500 : 200 }));
    t = await startTestService(kind, {
      worker: true,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
    });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await subscriber?.close();
    await otlp?.close();
  });

  it("puts the request under the incoming traceparent, and every attempt in the emit's trace", async () => {
    const endpointId = (
      await t.call('POST', '/v1/webhooks', t.keys.tenant, { url: subscriber.url, events: ['*'] })
    ).json().id as string;
    const emitted = await t.inject({
      method: 'POST',
      url: '/v1/events',
      headers: {
        authorization: `Bearer ${t.keys.producer}`,
        traceparent: `00-${INCOMING_TRACE}-${INCOMING_SPAN}-01`,
      },
      payload: { tenant_id: 'acme', type: 'user.created', data: { userId: 'user_1' } },
    });
    expect(emitted.statusCode).toBe(202);
    const messageId = emitted.json().id as string;
    await subscriber.waitFor(2, 30_000);
    // Spans are batched: the service's close exports what is left.
    await t.close();
    expect(subscriber.requests.every((r) => r.headers.traceparent === undefined)).toBe(true);

    const inTrace = otlp.spans.filter((s) => s.traceId === INCOMING_TRACE);
    const request = inTrace.find((s) => s.name === 'POST /v1/events')!;
    expect(request).toMatchObject({
      parentSpanId: INCOMING_SPAN,
      kind: 2, // SERVER
      service: 'hookline',
      attributes: {
        'http.request.method': 'POST',
        'url.path': '/v1/events',
        'http.route': '/v1/events',
        'http.response.status_code': 202,
      },
    });
    const emit = inTrace.find((s) => s.name === 'hookline.emit')!;
    expect(emit).toMatchObject({
      parentSpanId: request.spanId,
      attributes: { 'hookline.tenant_id': 'acme', 'hookline.message_id': messageId },
    });
    // SQLite fans a tenant's few endpoints out in the emit's transaction; PostgreSQL leaves it to a worker.
    expect(inTrace.filter((s) => s.name === 'hookline.fanout')).toEqual([
      expect.objectContaining({
        parentSpanId: emit.spanId,
        attributes: {
          'hookline.tenant_id': 'acme',
          'hookline.message_id': messageId,
          'hookline.deliveries': 1,
          'hookline.fanout.on_emit': kind === 'sqlite',
        },
      }),
    ]);
    const attempts = inTrace
      .filter((s) => s.name === 'hookline.attempt')
      .sort((a, b) => Number(a.attributes['hookline.attempt']) - Number(b.attributes['hookline.attempt']));
    expect(attempts.map((s) => [s.parentSpanId, s.attributes])).toEqual(
      [1, 2].map((n) => [
        emit.spanId,
        expect.objectContaining({
          'hookline.tenant_id': 'acme',
          'hookline.endpoint_id': endpointId,
          'hookline.message_id': messageId,
          'hookline.attempt': n,
          'hookline.outcome': n === 1 ? 'failed' : 'succeeded',
          'http.response.status_code': n === 1 ? 500 : 200,
        }),
      ]),
    );
    // No attribute carries the subscriber's URL or the payload.
    const everything = JSON.stringify(otlp.spans);
    expect(everything).not.toContain(subscriber.url);
    expect(everything).not.toContain('user_1');
  }, 60_000);
});

describe('the http/protobuf protocol', () => {
  it('posts protobuf to the traces endpoint', async () => {
    const otlp = await startOtlpReceiver();
    try {
      const tracing = await startTracing({
        tracesUrl: `${otlp.url}/v1/traces`,
        protocol: 'http/protobuf',
        serviceName: 'hookline',
        sampler: 'parentbased_always_on',
        samplerRatio: 1,
      });
      tracing.startSpan('hookline.test', null).end();
      await tracing.shutdown();
      expect(otlp.received).toEqual(['/v1/traces application/x-protobuf']);
    } finally {
      await otlp.close();
    }
  });
});
