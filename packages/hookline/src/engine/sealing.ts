// What the engine keeps sealed (docs/security.md, "What is stored") and the label each value is sealed
// under. The label is the AES-GCM associated data: it names the row a value belongs to, so a sealed
// value copied into another row does not open there. The subscriber's answers are sealed under their
// own labels (engine/last-error.ts).
import type { Envelope } from '../crypto/envelope.js';
import type { EndpointRow } from '../store/endpoints.js';
import type { KeyConverter } from '../store/migrations/index.js';

/** A message's payload. */
export function messageAad(messageId: string): string {
  return `message:${messageId}`;
}

/** A message's ordering key, kept sealed beside its hash for operators (dead letters show it). */
export function orderingKeyAad(messageId: string): string {
  return `message:${messageId}:ordering_key`;
}

/** What is stored of an emit's keys (storedKeys). */
export interface StoredKeys {
  /** The Idempotency-Key's keyed hash; null without one. */
  idempotencyKey: string | null;
  /** The ordering key's keyed hash: what lines are matched on; null without one. */
  orderingKey: string | null;
  /** The ordering key sealed, bound to the message: opened only to show it to operators. */
  orderingKeySealed: Buffer | null;
}

/**
 * What is stored of the keys of message `messageId`: keyed hashes (crypto/envelope.ts, keyHash) and
 * the ordering key sealed, never a value in clear (docs/security.md, "What is stored"). The same
 * tenant and value always give the same hash, so a key's line and an Idempotency-Key's earlier
 * message are found as they were with the values.
 */
export function storedKeys(
  envelope: Envelope,
  messageId: string,
  input: { tenantId: string; idempotencyKey?: string | null; orderingKey?: string | null },
): StoredKeys {
  const { tenantId, idempotencyKey, orderingKey } = input;
  return {
    idempotencyKey: idempotencyKey == null ? null : envelope.keyHash('idempotency', tenantId, idempotencyKey),
    orderingKey: orderingKey == null ? null : envelope.keyHash('ordering', tenantId, orderingKey),
    orderingKeySealed: orderingKey == null ? null : envelope.seal(orderingKey, orderingKeyAad(messageId)),
  };
}

/** The ordering key of a message as operators see it; null for an unkeyed message. */
export function openOrderingKey(envelope: Envelope, messageId: string, sealed: Buffer | null): string | null {
  return sealed === null ? null : envelope.openText(sealed, orderingKeyAad(messageId));
}

/** What migration 14 needs to convert keys stored in clear (store/migrations/014-hashed-keys.ts). */
export function keyConverter(envelope: Envelope): KeyConverter {
  return {
    keyHash: (kind, tenantId, value) => envelope.keyHash(kind, tenantId, value),
    sealOrderingKey: (messageId, value) => envelope.seal(value, orderingKeyAad(messageId)),
  };
}

/** An endpoint's signing secret, the current one or the previous during its grace. */
export function secretAad(endpointId: string, which: 'current' | 'previous'): string {
  return `endpoint:${endpointId}:${which}_secret`;
}

/** An endpoint's custom headers (endpoints/custom-headers.ts checks them). */
export function headersAad(endpointId: string): string {
  return `endpoint:${endpointId}:headers`;
}

/** The sealed form stored in the endpoint row; null for no headers. */
export function sealHeaders(
  envelope: Envelope,
  endpointId: string,
  headers: Record<string, string>,
): Buffer | null {
  if (Object.keys(headers).length === 0) return null;
  return envelope.seal(JSON.stringify(headers), headersAad(endpointId));
}

export function openHeaders(
  envelope: Envelope,
  endpointId: string,
  sealed: Buffer | null,
): Record<string, string> {
  if (sealed === null) return {};
  return JSON.parse(envelope.openText(sealed, headersAad(endpointId))) as Record<string, string>;
}

/** A dead letter's original: the body and the headers of its first attempt. */
export function deadLetterAad(deadLetterId: string): string {
  return `dead_letter:${deadLetterId}`;
}

/** The secrets an attempt at `now` is signed with: the current one, plus the previous during its grace. */
export function signingSecrets(
  envelope: Envelope,
  row: Pick<EndpointRow, 'id' | 'secret' | 'previous_secret' | 'previous_secret_expires_at'>,
  now: number,
): string[] {
  const secrets = [envelope.openText(row.secret, secretAad(row.id, 'current'))];
  if (
    row.previous_secret &&
    row.previous_secret_expires_at !== null &&
    now < Number(row.previous_secret_expires_at)
  ) {
    secrets.push(envelope.openText(row.previous_secret, secretAad(row.id, 'previous')));
  }
  return secrets;
}

/** A dead letter's original, as the worker sealed it when the delivery died. */
export interface OriginalMessage {
  /** The raw body exactly as sent. */
  body: string;
  /** The headers of the first attempt. */
  headers: Record<string, string>;
}

export function sealOriginal(envelope: Envelope, deadLetterId: string, original: OriginalMessage): Buffer {
  return envelope.seal(JSON.stringify(original), deadLetterAad(deadLetterId));
}

export function openOriginal(envelope: Envelope, deadLetterId: string, sealed: Buffer): OriginalMessage {
  return JSON.parse(envelope.openText(sealed, deadLetterAad(deadLetterId))) as OriginalMessage;
}
