// What goes on the wire for one attempt (docs/contract.md §5): the same body every time, re-signed with a fresh
// timestamp so a retry hours later still passes a consumer's five-minute window.
import { signatureHeader } from '@hookline/consumer';

export const USER_AGENT = 'hookline/0.1.0';

export function deliveryHeaders(input: {
  hookId: string;
  eventType: string;
  body: string;
  secrets: readonly string[];
  nowMs: number;
}): Record<string, string> {
  const timestamp = Math.floor(input.nowMs / 1000);
  return {
    'content-type': 'application/json',
    'hook-id': input.hookId,
    'hook-timestamp': String(timestamp),
    'hook-signature': signatureHeader({
      secrets: [...input.secrets],
      id: input.hookId,
      timestamp,
      body: input.body,
    }),
    'service-webhook-event': input.eventType,
    'user-agent': USER_AGENT,
  };
}

/**
 * The request headers of an attempt: the endpoint's custom headers, then hookline's own (no custom name
 * can be one of them: endpoints/custom-headers.ts). Only hookline's own are kept with the delivery as
 * "first sent" (deliveries.first_headers is not sealed, and custom headers often carry a token; they
 * stay sealed in the endpoint row).
 */
export function requestHeaders(
  own: Readonly<Record<string, string>>,
  custom: Readonly<Record<string, string>>,
): Record<string, string> {
  return { ...custom, ...own };
}
