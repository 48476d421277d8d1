import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { TENANT_ID_PATTERN } from '../../tenants.js';

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: 'Stable snake_case code; see docs/errors.md' }),
      message: Type.String(),
    }),
  },
  { $id: 'Error' },
);

export const TenantId = Type.String({
  pattern: TENANT_ID_PATTERN,
  description: 'Tenant id: 1-64 of A-Z a-z 0-9 _ -',
  'x-accepts': '1-64 characters of A-Z, a-z, 0-9, _ or -',
});

export const Limit = Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Page size, 1-100' });

export const Cursor = Type.String({
  minLength: 1,
  maxLength: 200,
  description: 'next_cursor of the previous page',
});

export const IdParam = Type.Object({ id: Type.String({ minLength: 1, maxLength: 200 }) });

export function page<T extends TSchema>(item: T) {
  return Type.Object({ data: Type.Array(item), next_cursor: Type.Union([Type.String(), Type.Null()]) });
}

/** Error answers every authenticated route can give, for the OpenAPI document. */
export const authErrors = {
  400: Type.Ref('Error'),
  401: Type.Ref('Error'),
  403: Type.Ref('Error'),
};

export const Timestamp = Type.String({ format: 'date-time' });
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

/**
 * For routes whose body is optional (`POST …/rotate-secret` with no body at all): a missing body is
 * validated, and handled, as `{}`.
 */
export async function emptyBodyAsObject(request: FastifyRequest): Promise<void> {
  if (request.body == null) request.body = {};
}
