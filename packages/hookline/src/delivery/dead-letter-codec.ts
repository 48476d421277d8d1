import type { Envelope } from '../crypto/envelope.js';

export interface OriginalMessage {
  /** The raw body exactly as sent. */
  body: string;
  /** The headers of the first attempt. */
  headers: Record<string, string>;
}

export function deadLetterAad(deadLetterId: string): string {
  return `dead_letter:${deadLetterId}`;
}

export function openOriginal(envelope: Envelope, deadLetterId: string, sealed: Buffer): OriginalMessage {
  return JSON.parse(envelope.openText(sealed, deadLetterAad(deadLetterId))) as OriginalMessage;
}
