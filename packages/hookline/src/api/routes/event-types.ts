// GET /v1/event-types: the event catalogue, for every role (docs/contract.md §4.5, docs/events.md).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { CATALOGUE } from '../../catalogue/index.js';
import { authErrors } from '../schemas/common.js';
import { EventTypeList } from '../schemas/event-types.js';

export function eventTypeRoutes(): FastifyPluginAsyncTypebox {
  return async (app) => {
    const answer = { data: CATALOGUE };
    app.get(
      '/v1/event-types',
      {
        config: { roles: ['tenant', 'producer', 'instance_manager'] },
        schema: {
          tags: ['events'],
          security: [{ bearer: [] }],
          summary:
            'The event catalogue: every event name with a description, the JSON Schema of its data and an example',
          response: { 200: EventTypeList, ...authErrors },
        },
      },
      async () => answer,
    );
  };
}
