// Liveness, readiness, metrics and the OpenAPI document: public, unauthenticated.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Context } from '../../context.js';
import { errorBody } from '../../errors.js';

export function serviceRoutes(ctx: Context): FastifyPluginAsyncTypebox {
  return async (app) => {
    const tags = ['service'];
    app.get(
      '/healthz',
      {
        schema: {
          tags,
          summary: 'The process is up',
          response: { 200: Type.Object({ status: Type.String() }) },
        },
      },
      async () => ({ status: 'ok' }),
    );
    app.get(
      '/readyz',
      {
        schema: {
          tags,
          summary: 'The database is reachable',
          response: { 200: Type.Object({ status: Type.String() }), 503: Type.Ref('Error') },
        },
      },
      async (request, reply) => {
        try {
          await ctx.db.ping();
          return { status: 'ready' };
        } catch (err) {
          request.log.warn({ err }, 'readiness check failed');
          return reply.status(503).send(errorBody('not_ready', 'the database is not reachable'));
        }
      },
    );
    app.get('/metrics', { schema: { tags, summary: 'Prometheus metrics' } }, async (_request, reply) => {
      const text = await ctx.metrics.text();
      return reply.type(ctx.metrics.contentType).send(text);
    });
    app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  };
}
