// Shared assertions and fixtures of the HTTP API suites (test/api/*.test.ts).
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { Clock } from '../../src/context.js';
import { signingSecrets } from '../../src/engine/sealing.js';
import { getEndpointById } from '../../src/store/endpoints.js';
import type { EndpointJson } from '../helpers/endpoints.js';
import type { TestService } from '../helpers/service.js';

export { createEndpoint, type CreateOptions, type EndpointJson } from '../helpers/endpoints.js';

export const SNAKE_CASE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;
/** `whsec_` + standard base64 of exactly 32 bytes (43 characters and one `=` of padding). */
export const SECRET_SHAPE = /^whsec_[A-Za-z0-9+/]{43}=$/;
export const ENDPOINT_ID_SHAPE = /^webhook_[0-9A-HJKMNP-TV-Z]{26}$/;
export const MESSAGE_ID_SHAPE = /^msg_[0-9A-HJKMNP-TV-Z]{26}$/;

export const ENDPOINT_KEYS = [
  'created_at',
  'description',
  'disabled_reason',
  'events',
  'headers',
  'id',
  'public_key',
  'rate_limit',
  'signature_scheme',
  'status',
  'updated_at',
  'url',
];

/** Asserts the one error shape `{error: {code, message}}` with a snake_case code; returns the code. */
export function expectError(res: LightMyRequestResponse, status: number, code?: string): string {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  const body = res.json() as { error: { code: string; message: string } };
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message']);
  expect(body.error.code).toMatch(SNAKE_CASE);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(0);
  if (code !== undefined) expect(body.error.code).toBe(code);
  return body.error.code;
}

/** Asserts a public endpoint object: exactly the docs/contract.md §4.1 fields, never the secret. */
export function expectEndpoint(res: LightMyRequestResponse, status = 200): EndpointJson {
  expect(res.statusCode, res.body).toBe(status);
  const body = res.json() as EndpointJson;
  expectEndpointShape(body);
  expect(res.body).not.toContain('whsec_');
  expect(res.body).not.toContain('whsk_');
  return body;
}

export function expectEndpointShape(body: EndpointJson): void {
  expect(Object.keys(body).sort()).toEqual(ENDPOINT_KEYS);
  expect(body.id).toMatch(ENDPOINT_ID_SHAPE);
  expect(new Date(body.created_at).toISOString()).toBe(body.created_at);
  expect(new Date(body.updated_at).toISOString()).toBe(body.updated_at);
}

/** Asserts a secret is `whsec_` + base64 of 32 bytes. */
export function expectSecretShape(secret: unknown): asserts secret is string {
  expect(secret).toMatch(SECRET_SHAPE);
  const raw = Buffer.from((secret as string).slice('whsec_'.length), 'base64');
  expect(raw).toHaveLength(32);
  expect(`whsec_${raw.toString('base64')}`).toBe(secret);
}

/** The secrets a delivery attempt at `now` would be signed with, read back from the store. */
export async function storedSecrets(
  t: TestService,
  id: string,
  now = t.service.ctx.clock(),
): Promise<string[]> {
  const row = await getEndpointById(t.service.ctx.db, id);
  if (!row) throw new Error(`endpoint ${id} is not in the store`);
  return signingSecrets(t.service.ctx.envelope, row, now);
}

export interface ManualClock {
  now(): number;
  advance(ms: number): void;
}

/**
 * Replaces the service's clock (the Context is shared by the routes and the emitter). With
 * `tick`, every reading is 1 ms later than the one before, so ids and timestamps strictly increase
 * without the test having to wait.
 */
export function manualClock(t: TestService, opts: { start?: number; tick?: boolean } = {}): ManualClock {
  let now = opts.start ?? Date.now();
  const clock: Clock = () => (opts.tick ? ++now : now);
  (t.service.ctx as { clock: Clock }).clock = clock;
  return { now: () => now, advance: (ms) => void (now += ms) };
}

/** Sends a raw body with an explicit content-type (or none). */
export function rawRequest(
  t: TestService,
  method: string,
  url: string,
  key: string | null,
  payload: string | Buffer | undefined,
  contentType: string | null = 'application/json',
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return t.inject({
    method: method as 'POST',
    url,
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(contentType ? { 'content-type': contentType } : {}),
      ...headers,
    },
    ...(payload !== undefined ? { payload } : {}),
  });
}
