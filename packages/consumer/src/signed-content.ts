/** A raw request body, exactly as received or sent: signatures are over bytes, never re-serialised JSON. */
export type RawBody = string | Uint8Array;

/** Both schemes sign `<hook-id>.<hook-timestamp>.<raw body>` (docs/signatures.md). */
export function signedPrefix(id: string, timestamp: number): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new TypeError(`timestamp must be a non-negative integer of Unix seconds, got ${timestamp}`);
  }
  return `${id}.${timestamp}.`;
}

/** The signed content as one buffer, for Ed25519, which takes the whole message at once. */
export function signedContent(id: string, timestamp: number, body: RawBody): Buffer {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  return Buffer.concat([Buffer.from(signedPrefix(id, timestamp)), bytes]);
}
