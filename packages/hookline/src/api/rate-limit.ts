// Requests per tenant API key, counted in this process's memory by @fastify/rate-limit: a runaway tenant
// script cannot crowd out the others. Only tenant keys are limited; producers are the identity product
// itself, and throttling them would only move events into its own retry logic.
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Context } from '../context.js';
import { HooklineError } from '../errors.js';

/**
 * HOOKLINE_TENANT_RATE_LIMIT is per second "in bursts of up to twice that" (docs/configuration.md):
 * each key may make twice the rate within a window of this many seconds, which starts at its first
 * request after the previous window ended.
 */
const WINDOW_S = 2;

/** Keys counted at once; the least recently seen are forgotten first. */
const MAX_KEYS = 10_000;

/** The tenant key a request is counted against, or null when it is not limited. */
function tenantKeyOf(request: FastifyRequest): string | null {
  const principal = request.principal;
  return principal?.role === 'tenant' && principal.keyId ? principal.keyId : null;
}

/** Registers the limit on every route added after it; nothing when the limit is 0 (off). */
export async function registerRateLimit(app: FastifyInstance, ctx: Context): Promise<void> {
  const perSecond = ctx.config.tenantRateLimit;
  if (perSecond <= 0) return;
  await app.register(rateLimit, {
    // After the onRequest hook that authenticates (api/auth.ts), before the body is read.
    hook: 'preParsing',
    max: perSecond * WINDOW_S,
    timeWindow: WINDOW_S * 1000,
    cache: MAX_KEYS,
    keyGenerator: (request) => tenantKeyOf(request) ?? '',
    allowList: (request) => tenantKeyOf(request) === null,
    // Only Retry-After, on a 429, as before this library: the X-RateLimit-* headers are not part of
    // the API (docs/contract.md).
    addHeadersOnExceeding: {
      'x-ratelimit-limit': false,
      'x-ratelimit-remaining': false,
      'x-ratelimit-reset': false,
    },
    addHeaders: {
      'x-ratelimit-limit': false,
      'x-ratelimit-remaining': false,
      'x-ratelimit-reset': false,
      'retry-after': true,
    },
    // Thrown: the error handler (api/errors.ts) answers it in the one error shape, status 429.
    errorResponseBuilder: (_request, limit) =>
      new HooklineError('rate_limited', `too many requests; retry in ${Math.ceil(limit.ttl / 1000)} s`),
  });
}
