// POST /v1/events: the producer's emit (docs/contract.md §4.2). Answers once the message is durable.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Context } from '../../context.js';
import type { Emitter } from '../../events/emit.js';
import { authErrors } from '../schemas/common.js';
import { requestSpan } from '../tracing-hooks.js';
import { EmitBody, EmitHeaders, Emitted } from '../schemas/events.js';

export function eventRoutes(ctx: Context, emitter: Emitter): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/v1/events',
      {
        // `data` is the payload: encrypted at rest and sent on byte for byte, NUL included.
        config: { roles: ['producer', 'instance_manager'], payloadFields: ['data'] },
        schema: {
          tags: ['events'],
          security: [{ bearer: [] }],
          summary: 'Emit an event; 202 once it is durable, before any delivery',
          headers: EmitHeaders,
          body: EmitBody,
          response: { 202: Emitted, ...authErrors, 409: Type.Ref('Error'), 413: Type.Ref('Error') },
        },
      },
      async (request, reply) => {
        const stopTimer = ctx.metrics.emitSeconds.startTimer();
        const result = await emitter.emit({
          tenantId: request.body.tenant_id,
          type: request.body.type,
          data: request.body.data,
          idempotencyKey: request.headers['idempotency-key'] ?? null,
          orderingKey: request.body.ordering_key ?? null,
          requestSpan: ctx.tracing.enabled ? requestSpan(request) : null,
        });
        stopTimer();
        if (!result.replayed) ctx.metrics.emitted.inc();
        return reply.status(202).send({ id: result.id });
      },
    );
  };
}
