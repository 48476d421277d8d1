// Emitting an event: validate, write the message durably (encrypted), wake the workers, answer.
// Nothing here depends on how many endpoints subscribe or how they behave: fan-out happens later.
import { isEventType, validateEventData } from '../catalogue/index.js';
import type { Context } from '../context.js';
import { HooklineError } from '../errors.js';
import { newId } from '../ids.js';
import type { Queryable } from '../store/db.js';
import { findByIdempotencyKey, insertMessage, releaseIdempotencyKey } from '../store/messages.js';
import { ensureTenant } from '../store/tenants.js';
import { assertTenantId } from '../tenants.js';

export const MAX_EVENT_BODY_BYTES = 256 * 1024;
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

export interface EmitInput {
  tenantId: string;
  type: string;
  data: unknown;
  idempotencyKey?: string | null;
}

export interface EmitResult {
  id: string;
  /** True when an earlier emit with the same idempotency key already created this message. */
  replayed: boolean;
}

export function messageAad(messageId: string): string {
  return `message:${messageId}`;
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

function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

function validate(input: EmitInput): string {
  assertTenantId(input.tenantId);
  if (!isEventType(input.type)) {
    throw new HooklineError('unknown_event_type', `unknown event type ${JSON.stringify(input.type)}`);
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
  if (Buffer.byteLength(body) > MAX_EVENT_BODY_BYTES) {
    throw new HooklineError('payload_too_large', `the event body exceeds ${MAX_EVENT_BODY_BYTES} bytes`);
  }
  return body;
}

export class Emitter {
  /** Tenants known to exist already, to spare a write per emit. */
  private readonly knownTenants = new Set<string>();

  constructor(private readonly ctx: Context) {}

  async emit(input: EmitInput): Promise<EmitResult> {
    const body = validate(input);
    const key = input.idempotencyKey ?? null;
    const fingerprint =
      key === null ? null : this.ctx.envelope.digest(canonicalJson({ type: input.type, data: input.data }));
    for (let attempt = 0; ; attempt++) {
      try {
        const result = await this.ctx.db.transaction((tx) => this.write(tx, input, body, key, fingerprint));
        if (!result.replayed) this.ctx.signal.notify();
        this.knownTenants.add(input.tenantId);
        return result;
      } catch (err) {
        // Two requests with the same new key raced: the loser reads the winner's answer.
        if (attempt === 0 && key !== null && isUniqueViolation(err)) continue;
        throw err;
      }
    }
  }

  private async write(
    tx: Queryable,
    input: EmitInput,
    body: string,
    key: string | null,
    fingerprint: string | null,
  ): Promise<EmitResult> {
    const now = this.ctx.clock();
    if (key !== null) {
      const existing = await findByIdempotencyKey(tx, input.tenantId, key);
      if (existing && now - Number(existing.created_at) < IDEMPOTENCY_WINDOW_MS) {
        if (existing.idempotency_fingerprint !== fingerprint) {
          throw new HooklineError(
            'idempotency_conflict',
            'this Idempotency-Key was already used with a different event in the last 24 hours',
          );
        }
        return { id: existing.id, replayed: true };
      }
      if (existing) await releaseIdempotencyKey(tx, existing.id);
    }
    if (!this.knownTenants.has(input.tenantId)) await ensureTenant(tx, input.tenantId, now);
    const id = newId('message', now);
    await insertMessage(tx, {
      id,
      tenant_id: input.tenantId,
      event_type: input.type,
      payload: this.ctx.envelope.seal(body, messageAad(id)),
      idempotency_key: key,
      idempotency_fingerprint: fingerprint,
      created_at: now,
      fanned_out_at: null,
    });
    return { id, replayed: false };
  }
}
