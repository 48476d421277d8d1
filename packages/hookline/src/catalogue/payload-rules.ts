import type { EventType } from './events.js';

/**
 * Shape of `data.userId` for `user.created`. The spec only says `user_<id>`; we require <id>
 * to be 1–255 characters of `[A-Za-z0-9_-]`, which covers the usual id generators (UUIDs,
 * ULIDs, nanoids, integers) while keeping ids URL- and log-safe and bounded in size.
 */
export const USER_ID_PATTERN = /^user_[A-Za-z0-9_-]{1,255}$/;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Path of the first value inside `value` that would not survive a JSON round trip unchanged
 * (functions, NaN, class instances, array holes, cycles…), or null if it is all plain JSON.
 * Payloads are stored and signed as JSON, so anything JSON.stringify would drop or alter must
 * be refused up front rather than delivered in a different shape than the producer sent.
 * The one exception is an object property set to undefined: stringify omits it, which means
 * the same as leaving it out, and in-process producers routinely pass optional fields that way.
 * Every emit passes through here: the path is spelt out only once something is wrong.
 */
function findNonJson(value: unknown, ancestors: Set<object>): string[] | null {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return null;
  if (typeof value === 'number') return Number.isFinite(value) ? null : [];
  if (typeof value !== 'object') return [];
  if (ancestors.has(value)) return [];
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const bad = findNonJson(value[i], ancestors);
        if (bad !== null) return [...bad, `[${i}]`];
      }
      return null;
    }
    if (!isPlainObject(value)) return [];
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue;
      const child = value[key];
      if (child === undefined) continue;
      const bad = findNonJson(child, ancestors);
      if (bad !== null) return [...bad, `.${key}`];
    }
    return null;
  } finally {
    ancestors.delete(value);
  }
}

function validateUserCreated(data: Record<string, unknown>): string | null {
  const userId = data['userId'];
  if (userId === undefined) return 'data.userId is required for user.created';
  if (typeof userId !== 'string') return 'data.userId must be a string';
  if (!USER_ID_PATTERN.test(userId)) {
    return 'data.userId must look like user_<id>, where <id> is 1-255 characters of A-Z, a-z, 0-9, _ or -';
  }
  return null;
}

/**
 * Checks an emitted event's `data` against the catalogue's rules. Returns a message suitable
 * for an API error (it names the offending field), or null when the data is acceptable.
 * Only `user.created` has documented fields (spec §2.2); every other type accepts any object.
 */
export function validateEventData(type: EventType, data: unknown): string | null {
  if (!isPlainObject(data)) return 'data must be a JSON object';
  const nonJson = findNonJson(data, new Set());
  if (nonJson !== null) return `data${nonJson.reverse().join('')} is not a JSON value`;
  if (type === 'user.created') return validateUserCreated(data);
  return null;
}
