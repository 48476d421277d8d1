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

/**
 * `count` signed delivery POSTs to `path` (undici request options), under one fresh secret, hook-ids
 * `<idPrefix><i>`: what the ceiling sends, and what the subscriber warms itself up with.
 */
export function signedPosts(path, count, idPrefix = 'msg_') {
  const secret = newSecret();
  return Array.from({ length: count }, (_, i) => {
    const body = deliveryBody(eventData(i));
    return { path, method: 'POST', headers: signedHeaders(secret, `${idPrefix}${i}`, body), body };
  });
}

/** Sends `requests` through an undici `pool`, `concurrency` at a time; resolves with how many were not 2xx. */
export async function postAll(pool, requests, concurrency) {
  let next = 0;
  let failed = 0;
  const loop = async () => {
    while (next < requests.length) {
      const res = await pool.request(requests[next++]);
      await res.body.dump();
      if (res.statusCode >= 300) failed++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return failed;
}
