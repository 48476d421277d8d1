// An endpoint's custom headers (docs/contract.md §4.1): extra request headers sent with every delivery,
// often a subscriber's token, so they are sealed at rest like signing secrets. Names hookline owns or
// that frame the request are refused, so a tenant can neither forge hookline's own headers nor break
// the request.
import { HooklineError } from '../errors.js';

export const HEADER_LIMITS = { count: 20, valueLength: 1024 } as const;

/** Refused names, matched case-insensitively; `*` ends a prefix. The list of docs/contract.md §4.1. */
export const RESERVED_HEADERS = [
  'hook-*',
  'webhook-*',
  'service-webhook-*',
  'proxy-*',
  'content-type',
  'content-length',
  'transfer-encoding',
  'connection',
  'host',
  'user-agent',
  'te',
  'upgrade',
  'trailer',
  'keep-alive',
  'traceparent',
  'tracestate',
] as const;

/** RFC 9110's token: what a header name may be. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Printable ASCII, no leading or trailing space (HTTP would strip it, so the value sent would differ). */
export const HEADER_VALUE_PATTERN = '^([\\x21-\\x7E]([\\x20-\\x7E]*[\\x21-\\x7E])?)?$';
const VALUE = new RegExp(HEADER_VALUE_PATTERN);

function reservedBy(name: string): string | undefined {
  return RESERVED_HEADERS.find((r) => (r.endsWith('*') ? name.startsWith(r.slice(0, -1)) : name === r));
}

const invalid = (message: string) => new HooklineError('invalid_headers', message);

/**
 * Checks a `headers` map and answers it with lower-case names (HTTP names are case-insensitive, so two
 * spellings of one name are refused rather than one silently winning).
 */
export function checkHeaders(input: unknown): Record<string, string> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw invalid('headers must be a JSON object of header names to string values');
  }
  const entries = Object.entries(input as Record<string, unknown>);
  if (entries.length > HEADER_LIMITS.count) {
    throw invalid(`headers has ${entries.length} entries; at most ${HEADER_LIMITS.count} are allowed`);
  }
  const out: Record<string, string> = {};
  for (const [name, value] of entries) {
    if (!TOKEN.test(name)) {
      throw invalid(
        `headers has invalid name ${JSON.stringify(name)}: a header name is 1 or more of A-Z a-z 0-9 and !#$%&'*+-.^_\`|~`,
      );
    }
    const lower = name.toLowerCase();
    const reserved = reservedBy(lower);
    if (reserved) {
      throw invalid(
        `headers has reserved name ${JSON.stringify(name)} (${reserved}): hookline sets it or it frames the request`,
      );
    }
    if (lower in out) throw invalid(`headers names ${JSON.stringify(lower)} twice (names ignore case)`);
    if (typeof value !== 'string' || value.length > HEADER_LIMITS.valueLength || !VALUE.test(value)) {
      throw invalid(
        `headers.${name} must be a string of at most ${HEADER_LIMITS.valueLength} printable ASCII characters, ` +
          'without a leading or trailing space',
      );
    }
    out[lower] = value;
  }
  return out;
}
