// OpenAPI 3.1's top-level `webhooks`: what a subscriber receives, one entry per catalogue event
// (docs/contract.md §4.5 and §5), written from the catalogue like GET /v1/event-types and docs/events.md.
import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import { CATALOGUE, type CatalogueEntry } from '../catalogue/index.js';
import { USER_AGENT } from '../delivery/wire.js';

function header(name: string, description: string, schema: Record<string, unknown>, example: unknown) {
  return { name, in: 'header' as const, required: true, description, schema, example };
}

const EXAMPLE_ID = 'msg_01JDQ3Z8K5V4X9R2M7N6P1T0WB';

function operation(entry: CatalogueEntry) {
  return {
    summary: entry.name,
    description: entry.description,
    operationId: `webhook-${entry.name}`,
    tags: ['webhooks delivered'],
    parameters: [
      header(
        'hook-id',
        'The message id: the same for every endpoint, retry and replay of this event; deduplicate on it',
        { type: 'string' },
        EXAMPLE_ID,
      ),
      header(
        'hook-timestamp',
        'Unix seconds of this attempt (every attempt is signed afresh); refuse one more than 5 minutes off',
        { type: 'string', pattern: '^[0-9]+$' },
        '1795312345',
      ),
      header(
        'hook-signature',
        'v1,<base64 HMAC-SHA256 of "<hook-id>.<hook-timestamp>.<raw body>">, keyed with the decoded ' +
          'signing secret; during a rotation grace period several, separated by spaces (docs/signatures.md)',
        { type: 'string' },
        'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
      ),
      header(
        'service-webhook-event',
        'The event name, equal to body type',
        { const: entry.name },
        entry.name,
      ),
      header('user-agent', 'hookline/<version>', { type: 'string' }, USER_AGENT),
    ],
    requestBody: {
      required: true,
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['type', 'data'],
            properties: { type: { const: entry.name }, data: entry.schema },
          },
          example: { type: entry.name, data: entry.example },
        },
      },
    },
    responses: {
      '2XX': { description: 'Acknowledged: delivered, no retry' },
      default: {
        description:
          'Any other answer, a time-out, a connection or TLS error, or a redirect (not followed): a failed ' +
          'attempt, retried with backoff under the same hook-id',
      },
    },
  };
}

type OpenApi31 = Extract<NonNullable<FastifyDynamicSwaggerOptions['openapi']>, { webhooks?: unknown }>;

/**
 * The `webhooks` object of /openapi.json. Typed loosely on the way in (the test checks the whole
 * document with an OpenAPI 3.1 validator, test/api/openapi.test.ts).
 */
export function openApiWebhooks(): OpenApi31['webhooks'] {
  const webhooks = Object.fromEntries(CATALOGUE.map((entry) => [entry.name, { post: operation(entry) }]));
  return webhooks as OpenApi31['webhooks'];
}
