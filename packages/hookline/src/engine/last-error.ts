// What a failed attempt leaves in the database (docs/security.md, "Encryption at rest"): the reason in
// clear, which hookline wrote itself ("HTTP 500", "timed out after 15000 ms", "TLS: …", "invalid HTTP
// answer (…)": delivery/sender.ts never puts the subscriber's bytes in it), and the start of the
// subscriber's answer body sealed like a payload. Subscribers echo what they were sent
// (`{"error":"bad input","received":<the body>}`), so their answers are personal data about our
// payloads and never stored in clear. Operators read both together (docs/contract.md §4.3 last_error).
import type { Envelope } from '../crypto/envelope.js';

/** The sender's `HTTP <status>[ (redirects are not followed)]: <answer>` (delivery/sender.ts). */
const HTTP_ANSWER = /^(HTTP \d{3}(?: \(redirects are not followed\))?): ([\s\S]*)$/;

export interface SplitError {
  /** hookline's own words: stored in clear. */
  reason: string;
  /** The subscriber's words: stored sealed, or null. */
  answer: string | null;
}

export function splitError(error: string): SplitError {
  const m = HTTP_ANSWER.exec(error);
  return m ? { reason: m[1]!, answer: m[2] || null } : { reason: error, answer: null };
}

/** The row a sealed answer belongs to is its additional authenticated data: copied elsewhere, it fails to open. */
export const deliveryAnswerAad = (deliveryId: string) => `delivery_answer:${deliveryId}`;
export const deadLetterAnswerAad = (deadLetterId: string) => `dead_letter_answer:${deadLetterId}`;

export function sealAnswer(envelope: Envelope, answer: string | null, aad: string): Buffer | null {
  return answer === null ? null : envelope.seal(answer, aad);
}

/** last_error as operators read it: the reason, then the subscriber's answer opened. */
export function showLastError(
  envelope: Envelope,
  reason: string | null,
  sealed: Buffer | null,
  aad: string,
): string | null {
  if (sealed === null || reason === null) return reason;
  try {
    return `${reason}: ${envelope.openText(sealed, aad)}`;
  } catch {
    // A wrong key must not hide the rest of the record from the operator looking into it.
    return `${reason}: (the answer cannot be decrypted with the configured keys)`;
  }
}
