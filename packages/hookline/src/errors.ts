// One error type with stable codes. Domain code throws HooklineError; the HTTP layer maps the code to a
// status and the `{error: {code, message}}` body. Every code is listed here and in docs/errors.md.

export const ERROR_STATUS = {
  validation_failed: 400,
  invalid_json: 400,
  invalid_event_filter: 400,
  invalid_url: 400,
  url_not_allowed: 400,
  invalid_cursor: 400,
  invalid_id: 400,
  unknown_event_type: 400,
  invalid_event_data: 400,
  invalid_tenant_id: 400,
  invalid_headers: 400,
  bad_request: 400,
  request_timeout: 408,
  headers_too_large: 431,
  unsupported_media_type: 415,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  endpoint_not_deleted: 409,
  endpoint_deleted: 409,
  endpoint_disabled: 409,
  endpoint_limit_reached: 409,
  idempotency_conflict: 409,
  replay_in_progress: 409,
  payload_too_large: 413,
  rate_limited: 429,
  not_ready: 503,
  shutting_down: 503,
  database_unavailable: 503,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class HooklineError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'HooklineError';
    this.status = ERROR_STATUS[code];
  }
}

export const notFound = (what: string): HooklineError => new HooklineError('not_found', `${what} not found`);

/** The one JSON shape of every error answer, the API's and the console's. */
export function errorBody(code: ErrorCode | string, message: string) {
  return { error: { code, message } };
}
