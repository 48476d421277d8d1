import { Type } from '@sinclair/typebox';
import { ROLES } from '../../store/api-keys.js';
import { Cursor, Limit, NullableTimestamp, TenantId, Timestamp } from './common.js';

const deadLetterProperties = {
  id: Type.String({ description: 'dl_…' }),
  tenant_id: Type.String(),
  endpoint_id: Type.String(),
  event_type: Type.String(),
  hook_id: Type.String({ description: 'The message id: the hook-id of every attempt and replay' }),
  attempts: Type.Integer(),
  last_error: Type.Union([Type.String(), Type.Null()]),
  died_at: Timestamp,
  replayed_at: NullableTimestamp,
  replay_status: Type.Union([Type.String(), Type.Null()], {
    description:
      'Status of the latest replay: held (behind an earlier delivery of its ordering key), pending, ' +
      'delivering, succeeded, dead, cancelled; null if never replayed',
  }),
  ordering_key: Type.Union([Type.String(), Type.Null()], {
    description:
      "The message's ordering_key (stored hashed, and sealed for this answer); a replay joins the back of its key's line",
  }),
};

export const DeadLetter = Type.Object(deadLetterProperties, { $id: 'DeadLetter' });

export const DeadLetterWithMessage = Type.Object({
  ...deadLetterProperties,
  body: Type.String({ description: 'The raw body exactly as sent' }),
  headers: Type.Record(Type.String(), Type.String(), { description: 'The headers of the first attempt' }),
});

export const DeadLetterQuery = Type.Object(
  {
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
    tenant_id: Type.Optional(TenantId),
    endpoint_id: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);

export const ReplayQueued = Type.Object({
  id: Type.String(),
  replay_delivery_id: Type.String(),
  status: Type.Literal('queued'),
});

export const BulkReplayBody = Type.Object(
  {
    tenant_id: Type.Optional(TenantId),
    endpoint_id: Type.Optional(Type.String({ maxLength: 200 })),
    since: Type.Optional(Type.String({ format: 'date-time', description: 'died at or after' })),
    until: Type.Optional(Type.String({ format: 'date-time', description: 'died before' })),
  },
  { additionalProperties: false },
);

export const ReplayJobCreated = Type.Object({
  id: Type.String({ description: 'rpl_…: follow it at GET /v1/admin/replays/{id}' }),
  count: Type.Integer({ description: 'Dead letters the job covers: those matching the filter now' }),
});

export const ReplayJob = Type.Object(
  {
    id: Type.String(),
    status: Type.Union([Type.Literal('running'), Type.Literal('done'), Type.Literal('failed')]),
    count: Type.Integer({ description: 'Dead letters the job covers' }),
    replayed: Type.Integer({ description: 'Queued for replay so far' }),
    skipped: Type.Integer({
      description: 'Left alone: a replay of them was already under way or had succeeded',
    }),
    failed: Type.Integer({ description: 'Not replayable: their endpoint is deleted or disabled' }),
    error: Type.Union([Type.String(), Type.Null()], {
      description: 'Why the job failed (status failed); what it queued before stays queued',
    }),
    created_at: Timestamp,
    finished_at: NullableTimestamp,
  },
  { description: 'When done, replayed + skipped + failed = count' },
);

const apiKeyProperties = {
  id: Type.String(),
  prefix: Type.String({ description: 'The first characters of the key, to recognise it' }),
  role: Type.String(),
  tenant_id: Type.Union([Type.String(), Type.Null()]),
  label: Type.String(),
  created_at: Timestamp,
  revoked_at: NullableTimestamp,
};

export const ApiKey = Type.Object(apiKeyProperties, { $id: 'ApiKey' });

export const CreatedApiKey = Type.Object({
  ...apiKeyProperties,
  key: Type.String({ description: 'The key itself, shown only in this answer' }),
});

export const CreateApiKeyBody = Type.Object(
  {
    role: Type.Union(ROLES.map((r) => Type.Literal(r))),
    tenant_id: Type.Optional(TenantId),
    label: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);

export const PageQuery = Type.Object(
  { limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) },
  { additionalProperties: false },
);

export const Tenant = Type.Object({
  id: Type.String(),
  created_at: Timestamp,
  endpoints: Type.Object({
    active: Type.Integer(),
    paused: Type.Integer(),
    disabled: Type.Integer(),
    deleted: Type.Integer(),
  }),
});

export const CreateTenantBody = Type.Object({ id: TenantId }, { additionalProperties: false });

export const TenantParams = Type.Object({ id: TenantId });

export const StatsQuery = Type.Object(
  {
    minutes: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_080, default: 60 })),
    tenant_id: Type.Optional(TenantId),
  },
  { additionalProperties: false },
);

export const AuditEntry = Type.Object({
  id: Type.String(),
  actor_key_id: Type.Union([Type.String(), Type.Null()]),
  actor_role: Type.String(),
  action: Type.String(),
  target: Type.Union([Type.String(), Type.Null()]),
  details: Type.Record(Type.String(), Type.Unknown()),
  created_at: Timestamp,
});
