import { createServer, type IncomingMessage, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, it, expect } from 'vitest';
import {
  createWebhookHandler,
  generateEd25519KeyPair,
  generateSecret,
  signatureHeader,
  type WebhookEvent,
  type WebhookHandlerOptions,
} from '../src/index.js';

const secret = generateSecret();
const servers: Array<() => Promise<void>> = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((close) => close()));
});

async function listen(listener: RequestListener): Promise<string> {
  const server = createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`;
}

/** A receiver using the handler, recording onEvent calls and unexpected errors. */
async function receiver(options: Partial<WebhookHandlerOptions> = {}) {
  const events: WebhookEvent[] = [];
  const errors: unknown[] = [];
  const handler = createWebhookHandler({
    secret,
    onEvent: (event) => void events.push(event),
    onError: (error) => void errors.push(error),
    ...options,
  });
  return { url: await listen((req, res) => void handler(req, res)), events, errors };
}

let counter = 0;
function newId(): string {
  return `msg_handler_${++counter}_${Date.now()}`;
}

/** Sends a delivery the way hookline does: signed with a fresh timestamp on every attempt. */
function deliver(
  url: string,
  {
    id = newId(),
    body = '{"type":"user.created","data":{"userId":"user_1"}}',
    tamper = false,
    keys = [secret],
  } = {},
) {
  const timestamp = Math.floor(Date.now() / 1000);
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'hook-id': id,
      'hook-timestamp': String(timestamp),
      'hook-signature': signatureHeader({ secrets: keys, id, timestamp, body }),
    },
    body: tamper ? body.replace('user_1', 'user_2') : body,
  });
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('createWebhookHandler over real HTTP', () => {
  it('answers 200 to a valid delivery and calls onEvent once', async () => {
    const { url, events } = await receiver();
    const id = newId();
    const res = await deliver(url, { id });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ received: true });
    expect(events).toEqual([
      expect.objectContaining({ id, type: 'user.created', data: { userId: 'user_1' } }),
    ]);
  });

  it('answers a replayed hook-id with 200 duplicate without calling onEvent again', async () => {
    const { url, events } = await receiver();
    const id = newId();
    expect((await deliver(url, { id })).status).toBe(200);
    const replay = await deliver(url, { id });
    expect(replay.status).toBe(200);
    expect(await replay.json()).toEqual({ duplicate: true });
    expect(events).toHaveLength(1);
  });

  it('answers 400 with a JSON error to a tampered delivery', async () => {
    const { url, events } = await receiver();
    const res = await deliver(url, { tamper: true });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid_signature');
    expect(body.error.message).toEqual(expect.any(String));
    expect(events).toHaveLength(0);
  });

  it('answers 400 missing_header to an unsigned POST', async () => {
    const { url } = await receiver();
    const res = await fetch(url, { method: 'POST', body: '{"type":"user.created","data":{}}' });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 'missing_header' } });
  });

  it('answers 500 when onEvent throws, then runs onEvent again on the retry', async () => {
    let calls = 0;
    const { url, errors } = await receiver({
      onEvent: () => {
        if (++calls === 1) throw new Error('database down');
      },
    });
    const id = newId();
    const first = await deliver(url, { id });
    expect(first.status).toBe(500);
    expect(JSON.stringify(await first.json())).not.toContain('database down');
    expect(errors).toHaveLength(1);
    const retry = await deliver(url, { id });
    expect(retry.status).toBe(200);
    expect(await retry.json()).toEqual({ received: true });
    expect(calls).toBe(2);
    expect((await deliver(url, { id })).status).toBe(200);
    expect(calls).toBe(2);
  });

  it('answers 413 to a body over maxBodyBytes (Content-Length declared)', async () => {
    const { url, events } = await receiver({ maxBodyBytes: 1024 });
    const data = { blob: 'x'.repeat(4096) };
    const res = await deliver(url, { body: JSON.stringify({ type: 'user.created', data }) });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: { code: 'payload_too_large' } });
    expect(events).toHaveLength(0);
  });

  it('answers 413 to a chunked body that grows past maxBodyBytes', async () => {
    const { url } = await receiver({ maxBodyBytes: 1024 });
    const chunk = new TextEncoder().encode('x'.repeat(600));
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 4; i++) controller.enqueue(chunk);
        controller.close();
      },
    });
    const timestamp = Math.floor(Date.now() / 1000);
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'hook-id': newId(), 'hook-timestamp': String(timestamp), 'hook-signature': 'v1,x' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
  });

  it('calls onEvent once for concurrent duplicates; the others get 409 or 200 duplicate', async () => {
    const gate = deferred();
    const started = deferred();
    let calls = 0;
    const { url } = await receiver({
      onEvent: async () => {
        calls++;
        started.resolve();
        await gate.promise;
      },
    });
    const id = newId();
    const first = deliver(url, { id });
    await started.promise;
    const duplicates = await Promise.all([1, 2, 3].map(() => deliver(url, { id })));
    for (const res of duplicates) {
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({ error: { code: 'in_progress' } });
    }
    gate.resolve();
    expect((await first).status).toBe(200);
    const later = await Promise.all([1, 2, 3].map(() => deliver(url, { id })));
    expect(await Promise.all(later.map((res) => res.json()))).toEqual([
      { duplicate: true },
      { duplicate: true },
      { duplicate: true },
    ]);
    expect(calls).toBe(1);
  });

  it('calls onEvent once when duplicates race from the start', async () => {
    let calls = 0;
    const { url } = await receiver({
      onEvent: async () => {
        calls++;
        await new Promise((resolve) => setTimeout(resolve, 50));
      },
    });
    const id = newId();
    const responses = await Promise.all(Array.from({ length: 8 }, () => deliver(url, { id })));
    const statuses = responses.map((res) => res.status);
    expect(statuses.filter((status) => status === 200).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((status) => status === 200 || status === 409)).toBe(true);
    expect(calls).toBe(1);
  });

  it('uses a raw body a framework left on req.body (express.raw style)', async () => {
    const events: WebhookEvent[] = [];
    const handler = createWebhookHandler({ secret, onEvent: (event) => void events.push(event) });
    const url = await listen(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      (req as IncomingMessage & { body?: unknown }).body = Buffer.concat(chunks);
      await handler(req, res);
    });
    expect((await deliver(url)).status).toBe(200);
    expect(events).toHaveLength(1);
  });

  it('answers 500 raw_body_required when a JSON parser already ran (express.json style)', async () => {
    const errors: unknown[] = [];
    const handler = createWebhookHandler({ secret, onEvent: () => {}, onError: (e) => void errors.push(e) });
    const url = await listen(async (req, res) => {
      let text = '';
      for await (const chunk of req) text += String(chunk);
      (req as IncomingMessage & { body?: unknown }).body = JSON.parse(text);
      await handler(req, res);
    });
    const res = await deliver(url);
    expect(res.status).toBe(500);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('raw_body_required');
    expect(body.error.message).toMatch(/raw request body/);
    expect(errors).toHaveLength(1);
  });

  it('answers 405 to other methods', async () => {
    const { url } = await receiver();
    const res = await fetch(url);
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
  });

  it('refuses a malformed secret when created, not on the first delivery', () => {
    expect(() => createWebhookHandler({ secret: 'whsec_!!', onEvent: () => {} })).toThrow(
      expect.objectContaining({ reason: 'invalid_secret' }),
    );
    expect(() => createWebhookHandler({ secret: [], onEvent: () => {} })).toThrow(
      expect.objectContaining({ reason: 'invalid_secret' }),
    );
  });
});

describe('createWebhookHandler with a public key (v1a)', () => {
  const endpointKeys = generateEd25519KeyPair();

  it('answers 200 to a v1a delivery and 400 to one signed by another key or only with v1', async () => {
    const { url, events } = await receiver({ secret: undefined, publicKey: endpointKeys.publicKey });
    const id = newId();
    expect((await deliver(url, { id, keys: [endpointKeys.privateKey] })).status).toBe(200);
    expect(events).toEqual([expect.objectContaining({ id, type: 'user.created' })]);

    const forged = await deliver(url, { keys: [generateEd25519KeyPair().privateKey] });
    expect(forged.status).toBe(400);
    expect(await forged.json()).toMatchObject({ error: { code: 'invalid_signature' } });
    const v1Only = await deliver(url, { keys: [secret] });
    expect(v1Only.status).toBe(400);
    expect(await v1Only.json()).toMatchObject({ error: { code: 'invalid_signature' } });
    expect(events).toHaveLength(1);
  });

  it('accepts a scheme-switching rotation header with either the public key or the secret', async () => {
    const byKey = await receiver({ secret: undefined, publicKey: endpointKeys.publicKey });
    const bySecret = await receiver();
    const keys = [endpointKeys.privateKey, secret];
    expect((await deliver(byKey.url, { keys })).status).toBe(200);
    expect((await deliver(bySecret.url, { keys })).status).toBe(200);
    expect(byKey.events).toHaveLength(1);
    expect(bySecret.events).toHaveLength(1);
  });

  it('refuses a malformed public key, or both secret and publicKey, when created', () => {
    expect(() => createWebhookHandler({ publicKey: 'whpk_!!', onEvent: () => {} })).toThrow(
      expect.objectContaining({ reason: 'invalid_public_key' }),
    );
    expect(() =>
      createWebhookHandler({ secret, publicKey: endpointKeys.publicKey, onEvent: () => {} }),
    ).toThrow(TypeError);
    expect(() => createWebhookHandler({ onEvent: () => {} })).toThrow(TypeError);
  });
});
