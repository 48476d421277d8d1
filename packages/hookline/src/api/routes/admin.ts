// /v1/admin: the Instance Manager surface (docs/contract.md §4.3). Dead letters, keys, tenants, health, audit.
// Nothing here is reachable with a tenant or producer key.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { auditView } from '../../engine/audit.js';
import { inspectDeadLetter, listDeadLetterViews, replayDeadLetter } from '../../admin/dead-letter-service.js';
import { getReplayJobView, startReplayJob } from '../../admin/replay-jobs.js';
import { registerTenant } from '../../admin/tenant-service.js';
import { deliveryStats, listTenantViews, tenantEndpointHealth } from '../../admin/overview-service.js';
import type { Context } from '../../context.js';
import { HooklineError, notFound } from '../../errors.js';
import { checkCursor, toPage } from '../../pagination.js';
import { createApiKey, listApiKeyViews, publicApiKey, revokeKey } from '../../keys/api-keys.js';
import { listAudit } from '../../store/audit-log.js';
import { principalOf } from '../auth.js';
import { IdParam, authErrors, emptyBodyAsObject, page } from '../schemas/common.js';
import {
  AuditEntry,
  BulkReplayBody,
  CreateApiKeyBody,
  CreateTenantBody,
  CreatedApiKey,
  DeadLetterQuery,
  DeadLetterWithMessage,
  PageQuery,
  ReplayJob,
  ReplayJobCreated,
  ReplayQueued,
  StatsQuery,
  Tenant,
  TenantParams,
} from '../schemas/admin.js';

const config = { roles: ['instance_manager'] as const };
const security = [{ bearer: [] }];
const errors = { ...authErrors, 404: Type.Ref('Error'), 409: Type.Ref('Error') };

function parseTime(value: string | undefined, field: string): number | null {
  if (value === undefined) return null;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new HooklineError('validation_failed', `${field} is not a date-time`);
  return ms;
}

export function adminRoutes(ctx: Context): FastifyPluginAsyncTypebox {
  return async (app) => {
    const tags = ['admin'];

    app.get(
      '/v1/admin/dead-letters',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'List dead letters, newest first (metadata only, never the payload)',
          querystring: DeadLetterQuery,
          response: { 200: page(Type.Ref('DeadLetter')), ...errors },
        },
      },
      async (request) =>
        listDeadLetterViews(
          ctx,
          { tenantId: request.query.tenant_id ?? null, endpointId: request.query.endpoint_id ?? null },
          request.query.limit ?? 20,
          request.query.cursor ?? null,
        ),
    );

    app.get(
      '/v1/admin/dead-letters/:id',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'One dead letter with its decrypted original message (body and first headers)',
          params: IdParam,
          response: { 200: DeadLetterWithMessage, ...errors },
        },
      },
      async (request) => {
        return inspectDeadLetter(ctx, request.params.id, principalOf(request));
      },
    );

    app.post(
      '/v1/admin/dead-letters/:id/replay',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Replay one dead letter: new attempts, same hook-id and body, current secret',
          params: IdParam,
          response: { 202: ReplayQueued, ...errors },
        },
      },
      async (request, reply) =>
        reply.status(202).send(await replayDeadLetter(ctx, request.params.id, principalOf(request))),
    );

    app.post(
      '/v1/admin/dead-letters/replay',
      {
        config,
        preValidation: emptyBodyAsObject,
        schema: {
          tags,
          security,
          summary:
            'Start a bulk-replay job over the dead letters matching the filter; answers at once, ' +
            'follow it at GET /v1/admin/replays/{id}',
          body: BulkReplayBody,
          response: { 202: ReplayJobCreated, ...errors },
        },
      },
      async (request, reply) => {
        const body = request.body ?? {};
        const job = await startReplayJob(
          ctx,
          {
            tenantId: body.tenant_id ?? null,
            endpointId: body.endpoint_id ?? null,
            since: parseTime(body.since, 'since'),
            until: parseTime(body.until, 'until'),
          },
          principalOf(request),
        );
        return reply.status(202).send(job);
      },
    );

    app.get(
      '/v1/admin/replays/:id',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'A bulk-replay job: its status and progress',
          params: IdParam,
          response: { 200: ReplayJob, ...errors },
        },
      },
      async (request) => getReplayJobView(ctx, request.params.id),
    );

    app.post(
      '/v1/admin/api-keys',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Create an API key; the key is in this answer only',
          body: CreateApiKeyBody,
          response: { 201: CreatedApiKey, ...errors },
        },
      },
      async (request, reply) => {
        const created = await createApiKey(
          ctx,
          {
            role: request.body.role,
            tenantId: request.body.tenant_id ?? null,
            label: request.body.label ?? '',
          },
          principalOf(request),
        );
        return reply.status(201).send({ ...publicApiKey(created.record), key: created.key });
      },
    );

    app.get(
      '/v1/admin/api-keys',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'List API keys (never the keys themselves), newest first',
          querystring: PageQuery,
          response: { 200: page(Type.Ref('ApiKey')), ...errors },
        },
      },
      async (request) => {
        return listApiKeyViews(ctx, request.query.limit ?? 20, request.query.cursor ?? null);
      },
    );

    app.delete(
      '/v1/admin/api-keys/:id',
      {
        config,
        schema: {
          tags,
          security,
          summary:
            'Revoke an API key; requests with it fail at once. A key revoked already is answered ' +
            'unchanged (200, its first revoked_at), and no second audit entry is written',
          params: IdParam,
          response: { 200: Type.Ref('ApiKey'), ...errors },
        },
      },
      async (request) => {
        const revoked = await revokeKey(ctx, request.params.id, principalOf(request));
        if (!revoked) throw notFound('API key');
        return publicApiKey(revoked.row);
      },
    );

    app.get(
      '/v1/admin/tenants',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'List tenants with their endpoint counts',
          querystring: PageQuery,
          response: { 200: page(Tenant), ...errors },
        },
      },
      async (request) => listTenantViews(ctx, request.query.limit ?? 20, request.query.cursor ?? null),
    );

    app.post(
      '/v1/admin/tenants',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Register a tenant ahead of its first key or event (tenants also appear implicitly)',
          body: CreateTenantBody,
          response: { 201: Type.Object({ id: Type.String() }), ...errors },
        },
      },
      async (request, reply) => {
        await registerTenant(ctx, request.body.id, principalOf(request));
        return reply.status(201).send({ id: request.body.id });
      },
    );

    app.get(
      '/v1/admin/tenants/:id/endpoints',
      {
        config,
        schema: {
          tags,
          security,
          summary: "A tenant's endpoints with their last 24 hours of outcomes and their backlog",
          params: TenantParams,
        },
      },
      async (request) => tenantEndpointHealth(ctx, request.params.id),
    );

    app.get(
      '/v1/admin/stats',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Delivery throughput, failures and queue depth per minute, and the current queue depth',
          querystring: StatsQuery,
        },
      },
      async (request) => deliveryStats(ctx, request.query.minutes ?? 60, request.query.tenant_id ?? null),
    );

    app.get(
      '/v1/admin/audit-log',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Operator actions, newest first',
          querystring: PageQuery,
          response: { 200: page(AuditEntry), ...errors },
        },
      },
      async (request) => {
        const limit = request.query.limit ?? 50;
        const rows = await listAudit(ctx.db, limit + 1, checkCursor(request.query.cursor, 'audit'));
        return toPage(rows, limit, auditView);
      },
    );
  };
}
