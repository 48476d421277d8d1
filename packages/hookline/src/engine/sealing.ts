// What the engine keeps sealed (docs/security.md, "What is stored") and the label each value is sealed
// under. The label is the AES-GCM associated data: it names the row a value belongs to, so a sealed
// value copied into another row does not open there. The subscriber's answers are sealed under their
// own labels (engine/last-error.ts).
import type { Envelope } from '../crypto/envelope.js';
import type { EndpointRow } from '../store/endpoints.js';

/** A message's payload. */
export function messageAad(messageId: string): string {
  return `message:${messageId}`;
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
