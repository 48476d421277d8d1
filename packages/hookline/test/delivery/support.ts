// Shared steps of the delivery suites: endpoints and events through the real API, rows read back
// from the real database, deliveries checked with the real consumer library.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { verifyWebhook, type WebhookEvent } from '@hookline/consumer';
import { expect } from 'vitest';
import { deliveryAnswerAad, showLastError } from '../../src/engine/last-error.js';
import type { DeadLetterRow } from '../../src/store/dead-letters.js';
import type { DeliveryRow } from '../../src/store/deliveries.js';
import type { EndpointQueueRow } from '../../src/store/endpoint-queues.js';
import type { ReceivedRequest } from '../helpers/receiver.js';
import type { TestService } from '../helpers/service.js';

export { createEndpoint, type CreatedEndpoint } from '../helpers/endpoints.js';

/** The request headers hookline itself sets (docs/contract.md §5); everything else on the wire is transport. */
export const HOOK_HEADERS = [
  'content-type',
  'hook-id',
  'hook-timestamp',
  'hook-signature',
  'service-webhook-event',
  'user-agent',
] as const;

/** Headers the HTTP client adds on its own. */
export const TRANSPORT_HEADERS = ['host', 'connection', 'content-length', 'transfer-encoding'];

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A random marker that cannot occur in a database by accident. */
export function marker(): string {
  return randomBytes(18).toString('base64url'); // 24 characters
}

export async function emit(
  t: TestService,
  type: string,
  data: unknown,
  tenantId = 'acme',
  orderingKey?: string,
): Promise<string> {
  const res = await t.call('POST', '/v1/events', t.keys.producer, {
    tenant_id: tenantId,
    type,
    data,
    ...(orderingKey === undefined ? {} : { ordering_key: orderingKey }),
  });
  expect(res.statusCode, res.body).toBe(202);
  const { id } = res.json<{ id: string }>();
  expect(id).toMatch(/^msg_/);
  return id;
}

export async function getEndpoint(
  t: TestService,
  id: string,
): Promise<{ status: string; disabled_reason: string | null }> {
  const res = await t.call('GET', `/v1/webhooks/${id}`, t.keys.tenant);
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

export async function deliveriesOf(t: TestService, messageId: string): Promise<DeliveryRow[]> {
  const rows = await t.service.ctx.db.all<DeliveryRow>(
    'SELECT * FROM deliveries WHERE message_id = $1 ORDER BY endpoint_id',
    [messageId],
  );
  return rows.map((r) => ({ ...r, attempts: Number(r.attempts) }));
}

export async function deliveriesTo(t: TestService, endpointId: string): Promise<DeliveryRow[]> {
  const rows = await t.service.ctx.db.all<DeliveryRow>(
    'SELECT * FROM deliveries WHERE endpoint_id = $1 ORDER BY id',
    [endpointId],
  );
  return rows.map((r) => ({ ...r, attempts: Number(r.attempts) }));
}

/** A delivery's last error as an operator reads it: the reason, and the subscriber's answer opened. */
export function shownError(t: TestService, row: Pick<DeliveryRow, 'id' | 'last_error' | 'last_response'>) {
  const sealed = row.last_response === null ? null : Buffer.from(row.last_response);
  return showLastError(t.service.ctx.envelope, row.last_error, sealed, deliveryAnswerAad(row.id));
}

export async function deadLettersOf(t: TestService, messageId: string): Promise<DeadLetterRow[]> {
  return t.service.ctx.db.all<DeadLetterRow>('SELECT * FROM dead_letters WHERE message_id = $1', [messageId]);
}

/** Verifies a received request exactly as a subscriber would. */
export function verifyRequest(
  req: ReceivedRequest,
  secret: string | readonly string[],
  now: number = req.at,
): WebhookEvent {
  return verifyWebhook({ secret, headers: req.headers, body: req.body, now });
}

export function verifies(req: ReceivedRequest, secret: string): boolean {
  try {
    verifyRequest(req, secret);
    return true;
  } catch {
    return false;
  }
}

/** The hook headers of a received request, as plain strings. */
export function hookHeaders(req: ReceivedRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of HOOK_HEADERS) {
    const value = req.headers[name];
    if (typeof value === 'string') out[name] = value;
  }
  return out;
}

/** Milliseconds until just after the next whole second, so the next attempt gets a new hook-timestamp. */
export function untilNextSecond(): number {
  return 1050 - (Date.now() % 1000);
}

/**
 * A bare subscriber for what the scripted receiver cannot do (trickling, huge bodies, redirects,
 * counting connections and concurrent requests).
 */
export interface RawServer {
  url: string;
  port: number;
  /** Requests whose handler ran. */
  requests: number;
  /** TCP connections accepted. */
  connections: number;
  /** Most requests open at the same time. */
  maxConcurrent: number;
  close(): Promise<void>;
}

export async function startRawServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<RawServer> {
  const sockets = new Set<Socket>();
  let open = 0;
  const state = {
    url: '',
    port: 0,
    requests: 0,
    connections: 0,
    maxConcurrent: 0,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  const server: Server = createServer((req, res) => {
    state.requests += 1;
    open += 1;
    state.maxConcurrent = Math.max(state.maxConcurrent, open);
    res.on('close', () => (open -= 1));
    handler(req, res);
  });
  server.on('connection', (s) => {
    state.connections += 1;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.port = (server.address() as AddressInfo).port;
  state.url = `http://127.0.0.1:${state.port}/hook`;
  return state;
}

/** A port on 127.0.0.1 that nothing listens on. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** An endpoint's queue row (store/endpoint-queues.ts): counters, adaptive limit, pause. */
export async function queueOf(t: TestService, endpointId: string): Promise<EndpointQueueRow | undefined> {
  const row = await t.service.ctx.db.one<EndpointQueueRow>(
    'SELECT * FROM endpoint_queues WHERE endpoint_id = $1',
    [endpointId],
  );
  if (!row) return undefined;
  const n = (v: number | null) => (v === null ? null : Number(v));
  return {
    ...row,
    active: Number(row.active),
    queued: Number(row.queued),
    in_flight: Number(row.in_flight),
    concurrency_limit: Number(row.concurrency_limit),
    concurrency_credit: Number(row.concurrency_credit),
    slow_start_threshold: Number(row.slow_start_threshold),
    next_due_at: n(row.next_due_at),
    paused_until: n(row.paused_until),
    ready_at: n(row.ready_at),
    last_decrease_at: n(row.last_decrease_at),
  };
}
