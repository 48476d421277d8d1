// Standard base64, padding optional. Buffer.from(…, 'base64') silently skips junk characters, so
// without this check a typo in a key would yield different bytes instead of an error.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

/** The bytes of a strict base64 string, or undefined when it is empty or not base64. */
export function decodeBase64(encoded: string): Buffer | undefined {
  if (encoded.length === 0 || !BASE64.test(encoded)) return undefined;
  return Buffer.from(encoded, 'base64');
}
