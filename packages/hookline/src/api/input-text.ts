// Text no field may hold: NUL and unpaired UTF-16 surrogates. PostgreSQL refuses NUL in text
// ("invalid byte sequence for encoding UTF8: 0x00", a 500) where SQLite stores it, and a lone
// surrogate cannot be encoded as UTF-8 at all (the driver would store U+FFFD instead, silently
// changing the value). Refusing both at the edge gives one answer on both stores (docs/security.md).

// A high surrogate not followed by a low one, or a low one not preceded by a high one. No `u` flag:
// the regex must see UTF-16 code units to find the unpaired halves.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function problemIn(text: string): string | null {
  if (text.includes('\u0000')) return 'contains a NUL character (U+0000)';
  if (LONE_SURROGATE.test(text)) return 'contains an unpaired UTF-16 surrogate (not valid Unicode text)';
  return null;
}

export interface ForbiddenText {
  /** Where it is, as the request validation names places: `querystring/cursor`, `body/events/1`. */
  path: string;
  message: string;
}

/**
 * The first string (or object key) in `value` holding forbidden text, or null. Walks without
 * recursion: a 256 KiB body can nest arrays 100,000 deep. `skip` names top-level fields that are
 * opaque payload, stored encrypted and sent on byte for byte.
 */
export function findForbiddenText(
  value: unknown,
  where: string,
  skip: readonly string[] = [],
): ForbiddenText | null {
  const stack: [unknown, string, boolean][] = [[value, where, true]];
  while (stack.length > 0) {
    const [item, path, top] = stack.pop()!;
    if (typeof item === 'string') {
      const problem = problemIn(item);
      if (problem) return { path, message: `${path} ${problem}` };
    } else if (Array.isArray(item)) {
      for (let i = item.length - 1; i >= 0; i--) stack.push([item[i], `${path}/${i}`, false]);
    } else if (item !== null && typeof item === 'object') {
      for (const [key, child] of Object.entries(item as Record<string, unknown>)) {
        const keyProblem = problemIn(key);
        if (keyProblem) return { path, message: `${path} has a field name that ${keyProblem}` };
        if (top && skip.includes(key)) continue;
        stack.push([child, `${path}/${key}`, false]);
      }
    }
  }
  return null;
}
