// Checking an event before it is written, shared by every way of emitting: the HTTP API and the
// in-process Emitter (events/emit.ts), the producer that emits inside the product's own transaction
// (producer/producer.ts) and test events (endpoints/test-events.ts). Pure: no I/O, so a bad event is
// refused before any query.
import { isEventType, unknownEventTypeMessage, validateEventData } from '../catalogue/index.js';
import { HooklineError } from '../errors.js';
import { assertTenantId } from '../tenants.js';

export const MAX_EVENT_BODY_BYTES = 256 * 1024;
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
export const MAX_ORDERING_KEY_LENGTH = 255;
// C0 and C1 control characters (docs/contract.md §4.2: "no control characters").
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

/** An ordering key's problem, or null when it is acceptable. */
export function orderingKeyProblem(key: unknown): string | null {
  if (typeof key !== 'string') return 'ordering_key must be a string';
  if (key.length === 0 || key.length > MAX_ORDERING_KEY_LENGTH) {
    return `ordering_key must be 1-${MAX_ORDERING_KEY_LENGTH} characters`;
  }
  if (CONTROL_CHARACTER.test(key)) return 'ordering_key must not contain control characters';
  return null;
}

/** What validate() checks: the fields every way of emitting has in common. */
export interface EventInput {
  tenantId: string;
  type: string;
  data: unknown;
  idempotencyKey?: string | null;
  orderingKey?: string | null;
}

/** The raw body every delivery of the message carries, byte for byte. */
export function messageBody(type: string, data: unknown): string {
  return JSON.stringify({ type, data });
}

/**
 * JSON with object keys sorted, so the same event sent again with its keys in another order is still
 * recognised as the same request under its Idempotency-Key.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v ?? null)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Checks an event and answers the raw body its deliveries will carry; throws a HooklineError. */
export function validate(input: EventInput): string {
  assertTenantId(input.tenantId);
  if (!isEventType(input.type)) {
    throw new HooklineError('unknown_event_type', unknownEventTypeMessage(input.type));
  }
  let body: string;
  try {
    const problem = validateEventData(input.type, input.data);
    if (problem) throw new HooklineError('invalid_event_data', problem);
    body = messageBody(input.type, input.data);
  } catch (err) {
    // Checking and serialising `data` walk it recursively: nesting a few thousand levels deep (a
    // small body) overflows the stack. That is the producer's input, not a server fault.
    if (err instanceof RangeError) {
      throw new HooklineError('invalid_event_data', 'data is nested too deeply');
    }
    throw err;
  }
  const key = input.idempotencyKey;
  if (key != null && (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH)) {
    throw new HooklineError(
      'validation_failed',
      `Idempotency-Key must be 1-${MAX_IDEMPOTENCY_KEY_LENGTH} characters`,
    );
  }
  if (input.orderingKey != null) {
    const problem = orderingKeyProblem(input.orderingKey);
    if (problem) throw new HooklineError('validation_failed', problem);
  }
  if (Buffer.byteLength(body) > MAX_EVENT_BODY_BYTES) {
    throw new HooklineError('payload_too_large', `the event body exceeds ${MAX_EVENT_BODY_BYTES} bytes`);
  }
  return body;
}

/**
 * What an Idempotency-Key's fingerprint is computed from (with the envelope's keyed digest): the same
 * event sent again, even with its keys in another order, has the same fingerprint, whichever way it
 * was emitted.
 */
export function fingerprintText(input: EventInput): string {
  return canonicalJson({ type: input.type, data: input.data, ordering_key: input.orderingKey ?? undefined });
}
