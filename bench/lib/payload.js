// The ~1 KiB event every case sends, and Standard Webhooks signing for the baselines that post it
// themselves (ceiling, BullMQ, graphile-worker): the same headers and HMAC hookline puts on the wire.
import { createHmac, randomBytes } from 'node:crypto';
import { now } from './stats.js';

export const EVENT_TYPE = 'user.updated';
const PAD = 'x'.repeat(1024);
/** JSON of `{"type":"user.updated","data":{…}}` with padding comes to about this many bytes. */
const TARGET_BYTES = 1024;

/** Event data with the emit time in `sentAt` (for emit-to-delivery latency) and padding to ~1 KiB. */
export function eventData(seq, sentAt = now()) {
  const data = { sentAt, seq, userId: `user_${seq}`, pad: '' };
  const size = JSON.stringify({ type: EVENT_TYPE, data }).length;
  data.pad = PAD.slice(0, Math.max(0, TARGET_BYTES - size));
  return data;
}

/** A signing secret in hookline's format; the HMAC key is the decoded bytes. */
export function newSecret() {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** Headers of one signed attempt (fresh timestamp), as hookline sends them. */
export function signedHeaders(secret, hookId, body) {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = createHmac('sha256', key).update(`${hookId}.${timestamp}.${body}`).digest('base64');
  return {
    'content-type': 'application/json',
    'hook-id': hookId,
    'hook-timestamp': String(timestamp),
    'hook-signature': `v1,${signature}`,
    'service-webhook-event': EVENT_TYPE,
  };
}

/** The body of a delivery for `data`, as a webhook sender would serialize it. */
export const deliveryBody = (data) => JSON.stringify({ type: EVENT_TYPE, data });
