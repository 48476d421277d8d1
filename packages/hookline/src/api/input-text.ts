// Text no field may hold: NUL and unpaired UTF-16 surrogates. PostgreSQL refuses NUL in text
// ("invalid byte sequence for encoding UTF8: 0x00", a 500) where SQLite stores it, and a lone
// surrogate cannot be encoded as UTF-8 at all (the driver would store U+FFFD instead, silently
// changing the value). Refusing both at the edge gives one answer on both stores (docs/security.md).

// A high surrogate not followed by a low one, or a low one not preceded by a high one. No `u` flag:
// the regex must see UTF-16 code units to find the unpaired halves.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
// Nearly all text holds no NUL and no surrogate at all: one plain scan clears it, and only the rest
// is searched for what exactly is wrong.
// eslint-disable-next-line no-control-regex -- NUL is what it looks for
const SUSPECT = /[\u0000\ud800-\udfff]/;

function problemIn(text: string): string | null {
  if (!SUSPECT.test(text)) return null;
  if (text.includes('\u0000')) return 'contains a NUL character (U+0000)';
  if (LONE_SURROGATE.test(text)) return 'contains an unpaired UTF-16 surrogate (not valid Unicode text)';
  return null;
}

export interface ForbiddenText {
  /** Where it is, as the request validation names places: `querystring/cursor`, `body/events/1`. */
  path: string;
  message: string;
}

/** A value still to be looked at, and how it was reached: its path is spelt out only for a problem. */
interface Visit {
  item: unknown;
  name: string;
  parent: Visit | null;
}

function pathOf(visit: Visit): string {
  const names: string[] = [];
  for (let v: Visit | null = visit; v; v = v.parent) names.push(v.name);
  return names.reverse().join('/');
}

/**
 * The first string (or object key) in `value` holding forbidden text, or null. Walks without
 * recursion: a 256 KiB body can nest arrays 100,000 deep. `skip` names top-level fields that are
 * opaque payload, stored encrypted and sent on byte for byte. Every request passes through here,
 * so the walk builds no path text unless it has a problem to name.
 */
export function findForbiddenText(
  value: unknown,
  where: string,
  skip: readonly string[] = [],
): ForbiddenText | null {
  const root: Visit = { item: value, name: where, parent: null };
  const stack: Visit[] = [root];
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const item = visit.item;
    if (typeof item === 'string') {
      const problem = problemIn(item);
      if (problem) {
        const path = pathOf(visit);
        return { path, message: `${path} ${problem}` };
      }
    } else if (Array.isArray(item)) {
      for (let i = item.length - 1; i >= 0; i--)
        stack.push({ item: item[i], name: String(i), parent: visit });
    } else if (item !== null && typeof item === 'object') {
      for (const key in item) {
        if (!Object.hasOwn(item, key)) continue;
        const keyProblem = problemIn(key);
        if (keyProblem) {
          const path = pathOf(visit);
          return { path, message: `${path} has a field name that ${keyProblem}` };
        }
        if (visit === root && skip.includes(key)) continue;
        stack.push({ item: (item as Record<string, unknown>)[key], name: key, parent: visit });
      }
    }
  }
  return null;
}
