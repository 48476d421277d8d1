/** Node's `IncomingHttpHeaders` and anything shaped like it (names in any case). */
export type HeaderRecord = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * The part of the WHATWG `Headers` class we use. Declared structurally so the package type-checks
 * without the DOM library and accepts Headers from undici, node-fetch or the global one.
 */
export interface HeadersLike {
  get(name: string): string | null;
}

export type WebhookHeaders = HeaderRecord | HeadersLike;

function isHeadersLike(headers: WebhookHeaders): headers is HeadersLike {
  return typeof (headers as { get?: unknown }).get === 'function';
}

/**
 * A header value, or undefined when absent. Repeated headers are joined with ", " (what both Node and
 * `Headers.get` do), so a duplicated hook-id or timestamp fails validation instead of being picked at
 * random.
 */
export function readHeader(headers: WebhookHeaders, name: string): string | undefined {
  if (isHeadersLike(headers)) return headers.get(name) ?? undefined;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue;
    return typeof value === 'string' ? value : value.join(', ');
  }
  return undefined;
}
