import { Type } from '@sinclair/typebox';
import { HEADER_LIMITS, HEADER_VALUE_PATTERN, RESERVED_HEADERS } from '../../endpoints/custom-headers.js';
import { ENDPOINT_LIMITS } from '../../endpoints/endpoint-service.js';
import { Cursor, Limit, Timestamp, TenantId } from './common.js';

const Url = Type.String({
  minLength: 1,
  maxLength: ENDPOINT_LIMITS.url,
  description: 'Absolute https:// URL',
  'x-accepts': `an absolute https:// URL of at most ${ENDPOINT_LIMITS.url} characters (http:// only when private networks are allowed)`,
});
const Events = Type.Array(Type.String({ maxLength: 100 }), {
  minItems: ENDPOINT_LIMITS.minEvents,
  maxItems: ENDPOINT_LIMITS.maxEvents,
  description: 'Catalogue event names or the wildcards user.*, organization.*, organizationMembership.*, *',
  'x-accepts':
    `a list of ${ENDPOINT_LIMITS.minEvents}-${ENDPOINT_LIMITS.maxEvents} event type names (GET /v1/event-types) ` +
    'or the wildcards user.*, organization.*, organizationMembership.*, *',
});
const Description = Type.String({ maxLength: ENDPOINT_LIMITS.description });
const RateLimit = Type.Union(
  [
    Type.Integer({ minimum: ENDPOINT_LIMITS.minRateLimit, maximum: ENDPOINT_LIMITS.maxRateLimit }),
    Type.Null(),
  ],
  {
    description:
      'At most this many attempts per second to the endpoint, all workers together (retries and replays ' +
      'included); null for no limit beyond adaptive concurrency',
  },
);

// Names (HTTP tokens, none reserved) are checked by endpoints/custom-headers.ts, which words each
// refusal; every error under `headers`, these schema's included, is 400 invalid_headers (api/errors.ts).
const HEADERS_ACCEPTS =
  `an object of at most ${HEADER_LIMITS.count} header names to values of at most ` +
  `${HEADER_LIMITS.valueLength} printable ASCII characters`;
const Headers = Type.Record(
  Type.String(),
  Type.String({
    maxLength: HEADER_LIMITS.valueLength,
    pattern: HEADER_VALUE_PATTERN,
    'x-accepts': `a string of at most ${HEADER_LIMITS.valueLength} printable ASCII characters, without a leading or trailing space`,
  }),
  {
    maxProperties: HEADER_LIMITS.count,
    description:
      'Extra request headers sent with every delivery (stored encrypted). Names are HTTP tokens; these are ' +
      `reserved (any case): ${RESERVED_HEADERS.join(', ')}`,
    'x-accepts': HEADERS_ACCEPTS,
  },
);

const Scheme = Type.Union([Type.Literal('v1'), Type.Literal('v1a')], {
  description: "v1: HMAC-SHA256 with a whsec_ secret; v1a: Ed25519, verified with the endpoint's public_key",
});

const endpointProperties = {
  id: Type.String({ description: 'webhook_…' }),
  url: Type.String(),
  events: Type.Array(Type.String()),
  description: Type.String(),
  rate_limit: RateLimit,
  headers: Type.Record(Type.String(), Type.String()),
  signature_scheme: Scheme,
  public_key: Type.Union([Type.String(), Type.Null()], {
    description: 'v1a endpoints: whpk_ + base64 of the 32-byte Ed25519 public key; null for v1',
  }),
  status: Type.Union(
    [Type.Literal('active'), Type.Literal('paused'), Type.Literal('disabled'), Type.Literal('deleted')],
    {
      description:
        'paused: by the tenant, events wait for it; disabled: by hookline (410 Gone or days of failures); ' +
        'deleted: undone only by restore',
    },
  ),
  disabled_reason: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
};

export const Endpoint = Type.Object(endpointProperties, { $id: 'Endpoint' });

export const EndpointWithSecret = Type.Object({
  ...endpointProperties,
  signing_secret: Type.Optional(
    Type.String({
      description: 'v1 endpoints only: whsec_…; shown only here and by rotate-secret',
    }),
  ),
});

export const CreateEndpointBody = Type.Object(
  {
    url: Url,
    events: Events,
    description: Type.Optional(Description),
    rate_limit: Type.Optional(RateLimit),
    headers: Type.Optional(Headers),
    signature_scheme: Type.Optional(Scheme),
  },
  { additionalProperties: false },
);

export const PatchEndpointBody = Type.Object(
  {
    url: Type.Optional(Url),
    events: Type.Optional(Events),
    description: Type.Optional(Description),
    rate_limit: Type.Optional(RateLimit),
    headers: Type.Optional(Headers),
    status: Type.Optional(
      Type.Union([Type.Literal('active'), Type.Literal('paused')], {
        description:
          '"paused" holds deliveries (events still arrive and wait); "active" resumes a paused endpoint or ' +
          're-enables a disabled one',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const RotateSecretBody = Type.Object(
  {
    grace_period_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 604_800,
        default: 0,
        description: 'How long deliveries also carry a signature made with the old secret',
      }),
    ),
    signature_scheme: Type.Optional(Scheme),
  },
  { additionalProperties: false },
);

export const RotatedSecret = Type.Object({
  id: Type.String(),
  signing_secret: Type.Optional(Type.String({ description: 'After the rotation a v1 endpoint: whsec_…' })),
  public_key: Type.Optional(Type.String({ description: 'After the rotation a v1a endpoint: whpk_…' })),
});

export const TenantQuery = Type.Object(
  { tenant_id: Type.Optional(TenantId) },
  { additionalProperties: false },
);

export const ListEndpointsQuery = Type.Object(
  {
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
    status: Type.Optional(
      Type.Union([
        Type.Literal('active'),
        Type.Literal('paused'),
        Type.Literal('disabled'),
        Type.Literal('deleted'),
      ]),
    ),
    tenant_id: Type.Optional(TenantId),
  },
  { additionalProperties: false },
);

export const TestEventBody = Type.Object(
  {
    type: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description:
          'A catalogue event name the endpoint subscribes to; default: the first such in catalogue order',
        'x-accepts': 'an event type name (GET /v1/event-types) that the endpoint subscribes to',
      }),
    ),
  },
  { additionalProperties: false },
);

export const TestEventAnswer = Type.Object({
  id: Type.String({ description: "msg_…: the test delivery's hook-id" }),
});
