// Creating an endpoint through the real API, for every suite (the API's and the delivery's).
import { expect } from 'vitest';
import type { TestService } from './service.js';

/** An endpoint as the API answers it (docs/contract.md §4.1). */
export interface EndpointJson {
  id: string;
  url: string;
  events: string[];
  description: string;
  rate_limit: number | null;
  headers: Record<string, string>;
  signature_scheme: 'v1' | 'v1a';
  public_key: string | null;
  status: 'active' | 'paused' | 'disabled' | 'deleted';
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
  signing_secret?: string;
}

/** As POST /v1/webhooks answers it: with the signing secret, the only time besides rotate. */
export type CreatedEndpoint = EndpointJson & { signing_secret: string };

export interface CreateOptions {
  /** The tenant key that creates it; the test service's `acme` tenant key by default. */
  key?: string;
  query?: string;
  url?: string;
  events?: string[];
  description?: string;
  rate_limit?: number | null;
  headers?: Record<string, string>;
}

/** POST /v1/webhooks and assert 201; answers the created endpoint with its secret. */
export async function createEndpoint(t: TestService, o: CreateOptions = {}): Promise<CreatedEndpoint> {
  const body: Record<string, unknown> = {
    url: o.url ?? 'https://hooks.example.com/in',
    events: o.events ?? ['*'],
  };
  if (o.description !== undefined) body['description'] = o.description;
  if (o.rate_limit !== undefined) body['rate_limit'] = o.rate_limit;
  if (o.headers !== undefined) body['headers'] = o.headers;
  const res = await t.call('POST', `/v1/webhooks${o.query ?? ''}`, o.key ?? t.keys.tenant, body);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CreatedEndpoint>();
}
