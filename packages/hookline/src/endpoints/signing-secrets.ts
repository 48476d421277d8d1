import type { Envelope } from '../crypto/envelope.js';
import type { EndpointRow } from '../store/endpoints.js';

export function secretAad(endpointId: string, which: 'current' | 'previous'): string {
  return `endpoint:${endpointId}:${which}_secret`;
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
