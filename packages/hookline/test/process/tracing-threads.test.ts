// Tracing in `hookline serve`, whose attempts are made in the delivery thread: that thread has its own
// span exporter (telemetry/tracing.ts), its attempt spans join the emit's trace made in the API
// thread, and both threads flush what they hold on SIGTERM (docs/operators.md, "Tracing").
import { afterEach, describe, expect, it } from 'vitest';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { createApiKeys, startProcess, type RunningProcess } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';
import { testEnv } from '../helpers/service.js';
import { STORE_KINDS, createTestDatabase } from '../helpers/stores.js';

const INCOMING_TRACE = '0af7651916cd43dd8448eb211c80319c';
const INCOMING_SPAN = 'b7ad6b7169203331';

describe.each(STORE_KINDS)('tracing in hookline serve on %s', (kind) => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it("exports the delivery thread's attempt spans in the emit's trace, flushed on SIGTERM", async () => {
    const database = await createTestDatabase(kind);
    cleanup.push(() => database.drop());
    const otlp = await startOtlpReceiver();
    cleanup.push(() => otlp.close());
    const subscriber = await startReceiver((_request, index) => ({ status: index === 0 ? 503 : 200 }));
    cleanup.push(() => subscriber.close());
    const env = testEnv(database, {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${otlp.url}/v1/traces`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'hookline-test',
    });
    const { tenantKey, producerKey } = await createApiKeys(env);
    const serve: RunningProcess = await startProcess(['serve'], env);
    cleanup.push(() => serve.kill('SIGKILL'));
    const created = await fetch(`${serve.address}/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tenantKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: subscriber.url, events: ['*'] }),
    });
    expect(created.status).toBe(201);
    const emitted = await fetch(`${serve.address}/v1/events`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${producerKey}`,
        'content-type': 'application/json',
        traceparent: `00-${INCOMING_TRACE}-${INCOMING_SPAN}-01`,
      },
      body: JSON.stringify({ tenant_id: 'acme', type: 'user.created', data: { userId: 'user_1' } }),
    });
    expect(emitted.status).toBe(202);
    const messageId = ((await emitted.json()) as { id: string }).id;
    await subscriber.waitFor(2, 30_000);
    expect(await serve.kill('SIGTERM')).toBe(0);

    const inTrace = otlp.spans.filter((s) => s.traceId === INCOMING_TRACE);
    const request = inTrace.find((s) => s.name === 'POST /v1/events');
    expect(request).toMatchObject({ parentSpanId: INCOMING_SPAN, service: 'hookline-test' });
    const emit = inTrace.find((s) => s.name === 'hookline.emit');
    expect(emit?.parentSpanId).toBe(request!.spanId);
    const attempts = inTrace
      .filter((s) => s.name === 'hookline.attempt')
      .map((s) => [s.parentSpanId, s.attributes['hookline.attempt'], s.attributes['hookline.outcome']])
      .sort((a, b) => Number(a[1]) - Number(b[1]));
    expect(attempts).toEqual([
      [emit!.spanId, 1, 'failed'],
      [emit!.spanId, 2, 'succeeded'],
    ]);
    expect(
      inTrace.filter((s) => s.name === 'hookline.attempt').map((s) => s.attributes['hookline.message_id']),
    ).toEqual([messageId, messageId]);
  }, 60_000);
});
