// /v1/webhooks: a tenant's endpoints (docs/contract.md §4.1). There is deliberately no delivery history,
// event listing or replay here (spec §1.6, §4 rule 2).
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Context } from '../../context.js';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpointView,
  listEndpointViews,
  patchEndpoint,
  restoreEndpoint,
  rotateSecret,
} from '../../endpoints/endpoint-service.js';
import { sendTestEvent } from '../../endpoints/test-events.js';
import { actingTenant } from '../auth.js';
import { IdParam, authErrors, emptyBodyAsObject, page } from '../schemas/common.js';
import {
  CreateEndpointBody,
  EndpointWithSecret,
  ListEndpointsQuery,
  PatchEndpointBody,
  RotateSecretBody,
  RotatedSecret,
  TenantQuery,
  TestEventAnswer,
  TestEventBody,
} from '../schemas/webhooks.js';

const config = { roles: ['tenant', 'instance_manager'] as const };
const tags = ['webhooks'];
const security = [{ bearer: [] }];
const notFound = { 404: Type.Ref('Error') };

export function webhookRoutes(ctx: Context): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/v1/webhooks',
      {
        config,
        schema: {
          tags,
          security,
          summary:
            "Create an endpoint; a v1 endpoint's answer carries its signing secret, shown only this once, " +
            "a v1a endpoint's its public key",
          querystring: TenantQuery,
          body: CreateEndpointBody,
          response: { 201: EndpointWithSecret, ...authErrors },
        },
      },
      async (request, reply) => {
        const tenantId = actingTenant(request, request.query.tenant_id);
        return reply.status(201).send(await createEndpoint(ctx, tenantId, request.body));
      },
    );

    app.get(
      '/v1/webhooks',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'List endpoints, newest first (deleted ones only with status=deleted)',
          querystring: ListEndpointsQuery,
          response: { 200: page(Type.Ref('Endpoint')), ...authErrors },
        },
      },
      async (request) => {
        const tenantId = actingTenant(request, request.query.tenant_id);
        return listEndpointViews(ctx, tenantId, {
          limit: request.query.limit ?? 20,
          cursor: request.query.cursor ?? null,
          status: request.query.status ?? null,
        });
      },
    );

    app.get(
      '/v1/webhooks/:id',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Get one endpoint',
          params: IdParam,
          querystring: TenantQuery,
          response: { 200: Type.Ref('Endpoint'), ...authErrors, ...notFound },
        },
      },
      async (request) =>
        getEndpointView(ctx, actingTenant(request, request.query.tenant_id), request.params.id),
    );

    app.patch(
      '/v1/webhooks/:id',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Change url, events or description; {"status": "active"} re-enables a disabled endpoint',
          params: IdParam,
          querystring: TenantQuery,
          body: PatchEndpointBody,
          response: { 200: Type.Ref('Endpoint'), ...authErrors, ...notFound, 409: Type.Ref('Error') },
        },
      },
      async (request) =>
        patchEndpoint(ctx, actingTenant(request, request.query.tenant_id), request.params.id, request.body),
    );

    app.delete(
      '/v1/webhooks/:id',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Delete an endpoint: no further deliveries, pending ones cancelled; undone by restore',
          params: IdParam,
          querystring: TenantQuery,
          response: { 200: Type.Ref('Endpoint'), ...authErrors, ...notFound },
        },
      },
      async (request) =>
        deleteEndpoint(ctx, actingTenant(request, request.query.tenant_id), request.params.id),
    );

    app.post(
      '/v1/webhooks/:id/restore',
      {
        config,
        schema: {
          tags,
          security,
          summary: 'Reactivate a deleted endpoint',
          params: IdParam,
          querystring: TenantQuery,
          response: { 200: Type.Ref('Endpoint'), ...authErrors, ...notFound, 409: Type.Ref('Error') },
        },
      },
      async (request) =>
        restoreEndpoint(ctx, actingTenant(request, request.query.tenant_id), request.params.id),
    );

    app.post(
      '/v1/webhooks/:id/rotate-secret',
      {
        config,
        preValidation: emptyBodyAsObject,
        schema: {
          tags,
          security,
          summary:
            'Replace the signing secret or key pair, optionally switching signature_scheme; with a grace ' +
            'period deliveries carry both signatures meanwhile',
          params: IdParam,
          querystring: TenantQuery,
          body: RotateSecretBody,
          response: { 200: RotatedSecret, ...authErrors, ...notFound },
        },
      },
      async (request) =>
        rotateSecret(
          ctx,
          actingTenant(request, request.query.tenant_id),
          request.params.id,
          request.body?.grace_period_seconds ?? 0,
          request.body?.signature_scheme,
        ),
    );

    app.post(
      '/v1/webhooks/:id/test',
      {
        config,
        preValidation: emptyBodyAsObject,
        schema: {
          tags,
          security,
          summary:
            'Send this endpoint alone one delivery of a catalogue example, signed and queued like any other',
          params: IdParam,
          querystring: TenantQuery,
          body: TestEventBody,
          response: { 202: TestEventAnswer, ...authErrors, ...notFound, 409: Type.Ref('Error') },
        },
      },
      async (request, reply) =>
        reply
          .status(202)
          .send(
            await sendTestEvent(
              ctx,
              actingTenant(request, request.query.tenant_id),
              request.params.id,
              request.body?.type,
            ),
          ),
    );
  };
}
