import { EVENT_DEFINITIONS, type EventDefinition } from './definitions.js';
import type { EventType } from './events.js';
import { UserId } from './fields.js';

/** Shape of `data.userId` (catalogue/fields.ts), which `user.created` enforces on emit. */
export const USER_ID_PATTERN = new RegExp(UserId.pattern!);

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

/** The patterns of the enforced fields, compiled once. */
const patterns = new Map<string, RegExp>();

function patternOf(source: string): RegExp {
  let re = patterns.get(source);
  if (!re) patterns.set(source, (re = new RegExp(source)));
  return re;
}

/**
 * The catalogue's `enforcedOnEmit` fields of `type` (today only `user.created`'s userId), checked against
 * their schema in the catalogue. Those are strings with a pattern, all this needs to understand.
 */
function checkEnforcedFields(type: EventType, data: Record<string, unknown>): string | null {
  const { schema, enforcedOnEmit }: EventDefinition = EVENT_DEFINITIONS[type];
  for (const field of enforcedOnEmit) {
    const value = data[field];
    if (value === undefined) return `data.${field} is required for ${type}`;
    if (typeof value !== 'string') return `data.${field} must be a string`;
    const fieldSchema = schema.properties[field] as { pattern?: string; 'x-accepts'?: string } | undefined;
    if (fieldSchema?.pattern !== undefined && !patternOf(fieldSchema.pattern).test(value)) {
      return `data.${field} must be ${fieldSchema['x-accepts'] ?? `a string matching ${fieldSchema.pattern}`}`;
    }
  }
  return null;
}

/**
 * Checks an emitted event's `data` against the catalogue's rules. Returns a message suitable
 * for an API error (it names the offending field), or null when the data is acceptable.
 * Only the catalogue's `enforcedOnEmit` fields are checked (`user.created`'s userId, spec §2.2); every
 * other field, and every other type's data, may be any JSON object.
 */
export function validateEventData(type: EventType, data: unknown): string | null {
  if (!isPlainObject(data)) return 'data must be a JSON object';
  const nonJson = findNonJson(data, new Set());
  if (nonJson !== null) return `data${nonJson.reverse().join('')} is not a JSON value`;
  return checkEnforcedFields(type, data);
}
