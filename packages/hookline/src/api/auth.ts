// Bearer API keys. Each route declares the roles it admits in its config; routes that declare none
// (health, metrics, the console page, the OpenAPI document) are public.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Context } from '../context.js';
import { HooklineError } from '../errors.js';
import { authenticate, type Principal } from '../keys/api-keys.js';
import type { Role } from '../store/api-keys.js';
import { assertTenantId } from '../tenants.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    roles?: readonly Role[];
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
}

function bearer(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

export function registerAuth(app: FastifyInstance, ctx: Context): void {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request) => {
    const roles = request.routeOptions.config.roles;
    if (!roles) return;
    const principal = await authenticate(ctx, bearer(request));
    if (!principal) {
      throw new HooklineError('unauthorized', 'missing or invalid API key; send Authorization: Bearer <key>');
    }
    if (!roles.includes(principal.role)) {
      throw new HooklineError(
        'forbidden',
        `this route is for ${roles.join(' or ')} keys, not ${principal.role}`,
      );
    }
    request.principal = principal;
  });
}

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new HooklineError('unauthorized', 'missing API key');
  return request.principal;
}

/**
 * The tenant a request acts for: a tenant key's own tenant, or for an instance manager the
 * `tenant_id` query parameter, which it must give.
 */
export function actingTenant(request: FastifyRequest, tenantIdParam: string | undefined): string {
  const principal = principalOf(request);
  if (principal.role === 'tenant') {
    if (tenantIdParam !== undefined && tenantIdParam !== principal.tenantId) {
      throw new HooklineError('forbidden', 'a tenant key acts only on its own tenant');
    }
    return principal.tenantId ?? '';
  }
  if (tenantIdParam === undefined) {
    throw new HooklineError('validation_failed', 'instance_manager keys must say which tenant: ?tenant_id=');
  }
  return assertTenantId(tenantIdParam);
}
