import { Type } from '@sinclair/typebox';
import { EVENT_TYPES } from '../../catalogue/index.js';
import { TenantId } from './common.js';

export const EmitBody = Type.Object(
  {
    tenant_id: TenantId,
    type: Type.String({
      description: `An event type (GET /v1/event-types, docs/events.md): ${EVENT_TYPES.join(', ')}`,
      maxLength: 100,
    }),
    data: Type.Object({}, { description: 'Event data; user.created needs userId shaped user_<id>' }),
    ordering_key: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        description:
          'Deliveries of messages sharing this key go to each endpoint one at a time, in emit order; ' +
          'no control characters (for example the userId)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const EmitHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
});

export const Emitted = Type.Object({
  id: Type.String({ description: 'msg_…; also the hook-id of every delivery' }),
});
