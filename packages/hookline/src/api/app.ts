// The Fastify application: validation (which also generates the OpenAPI document), auth, errors, routes.
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Ajv } from 'ajv';
import formatsPlugin from 'ajv-formats';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { consoleRoutes } from '../console/routes.js';
import type { Context } from '../context.js';
import { errorBody, HooklineError } from '../errors.js';
import type { Emitter } from '../events/emit.js';
import { MAX_EVENT_BODY_BYTES } from '../engine/validate-event.js';
import { AccessLog } from './access-log.js';
import { registerAuth } from './auth.js';
import { registerTracing } from './tracing-hooks.js';
import { onClientError } from './client-error.js';
import { onFrameworkError, registerErrorHandling } from './errors.js';
import { findForbiddenText } from './input-text.js';
import { openApiWebhooks } from './openapi-webhooks.js';
import { registerRateLimit } from './rate-limit.js';
import { adminRoutes } from './routes/admin.js';
import { eventTypeRoutes } from './routes/event-types.js';
import { eventRoutes } from './routes/events.js';
import { serviceRoutes } from './routes/service.js';
import { webhookRoutes } from './routes/webhooks.js';
import { ErrorBody } from './schemas/common.js';
import { Endpoint } from './schemas/webhooks.js';
import { ApiKey, DeadLetter } from './schemas/admin.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Top-level body fields that are opaque payload (the event's `data`): stored encrypted and sent
     * on byte for byte, so they are not checked for NUL and unpaired surrogates.
     */
    payloadFields?: readonly string[];
  }
}

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext.
const addFormats = formatsPlugin as unknown as (ajv: Ajv) => Ajv;

export interface AppOptions {
  emitter: Emitter;
  /** Extra route plugins (admin API, console) mounted by later layers. */
  plugins?: ((app: FastifyInstance) => Promise<void>)[];
}

/** Schemas referenced by `$ref` from several routes. */
const SHARED_SCHEMAS = [ErrorBody, Endpoint, DeadLetter, ApiKey];

function validators() {
  // verbose: each error carries the schema that failed, from which api/validation-message.ts says
  // what the field accepts.
  const options = {
    removeAdditional: false,
    useDefaults: true,
    allErrors: false,
    strict: false,
    verbose: true,
  } as const;
  // Bodies are JSON and keep their types: {"url": 5} is an error, not "5". Query strings and
  // headers are text, so numbers there are coerced.
  const body = addFormats(new Ajv({ ...options, coerceTypes: false }));
  const text = addFormats(new Ajv({ ...options, coerceTypes: true }));
  for (const schema of SHARED_SCHEMAS) {
    body.addSchema(schema);
    text.addSchema(schema);
  }
  return { body, text };
}

export async function buildApp(ctx: Context, options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    logController: new AccessLog(),
    bodyLimit: MAX_EVENT_BODY_BYTES,
    // The router's own errors (an id that is not valid percent-encoding, or longer than the router
    // will match) never reach setErrorHandler; without this they answer in Fastify's shape, not ours.
    frameworkErrors: onFrameworkError,
    // Refusals node:http makes before any route runs (431 headers too large, 400 not HTTP) answer
    // in the one error shape too, instead of Fastify's own.
    clientErrorHandler: onClientError,
    // Fastify's own 503 while closing has its own shape; the onRequest hook below answers instead.
    return503OnClosing: false,
  }).withTypeProvider<TypeBoxTypeProvider>();
  // First, so every request has its span, the ones refused below included.
  registerTracing(app, ctx);

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', async (_request, reply) => {
    if (!closing) return;
    return reply
      .status(503)
      .header('connection', 'close')
      .send(errorBody('shutting_down', 'the server is shutting down; retry on another instance'));
  });

  // One check for every route, before its schema: no string anywhere in the path, query, headers or
  // body may hold NUL or an unpaired surrogate (src/api/input-text.ts says why).
  app.addHook('preValidation', async (request) => {
    const problem =
      findForbiddenText(request.params, 'params') ??
      findForbiddenText(request.query, 'querystring') ??
      findForbiddenText(request.headers, 'headers') ??
      findForbiddenText(request.body, 'body', request.routeOptions.config.payloadFields);
    // A cursor is opaque to clients: whatever is wrong with it, it is not one this API returned.
    if (problem) {
      // An endpoint's custom headers answer invalid_headers for every fault (docs/contract.md §4.1).
      const code =
        problem.path === 'querystring/cursor'
          ? 'invalid_cursor'
          : /^body\/headers(\/|$)/.test(problem.path)
            ? 'invalid_headers'
            : 'validation_failed';
      throw new HooklineError(code, problem.message);
    }
  });

  const ajv = validators();
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? ajv.body : ajv.text).compile(schema),
  );

  // An empty body with content-type JSON is treated as no body, so `POST …/restore` with a JSON
  // content-type header and nothing else is not an error. All bodies are JSON (docs/contract.md §4): the
  // built-in text/plain parser goes too, so any other content type is 415 unsupported_media_type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (!/\S/.test(text)) return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      const err = new SyntaxError('invalid JSON') as SyntaxError & { statusCode: number };
      err.statusCode = 400;
      done(err, undefined);
    }
  });

  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'hookline',
        version: '0.1.0',
        description:
          'Webhook delivery: tenants manage endpoints, producers emit events, operators handle dead letters.',
      },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      webhooks: openApiWebhooks(),
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (json.$id as string) ?? `def-${i}` },
  });

  registerErrorHandling(app);
  registerAuth(app, ctx);
  await registerRateLimit(app, ctx);
  await app.register(serviceRoutes(ctx));
  await app.register(webhookRoutes(ctx));
  await app.register(eventRoutes(ctx, options.emitter));
  await app.register(eventTypeRoutes());
  await app.register(adminRoutes(ctx));
  await app.register(consoleRoutes());
  for (const plugin of options.plugins ?? []) await app.register(plugin);
  await app.ready();
  return app;
}
