// One sentence for a request that failed its route's schema: the field, and what it accepts
// (docs/errors.md). Ajv reports the keyword that failed ("must be equal to constant", and for a union
// one line per branch, then "must match a schema in anyOf"); the sentence is written from the field's
// whole schema instead, so it says what would have been right.
import type { ErrorObject } from 'ajv';

type Schema = { [keyword: string]: unknown };
type Part = 'body' | 'querystring' | 'params' | 'headers' | string;

/** What a schema accepts, as words: "an integer from 1 to 10000, or null". */
export function describeSchema(schema: Schema): string {
  const accepts = schema['x-accepts'];
  if (typeof accepts === 'string') return accepts;
  if ('const' in schema) return JSON.stringify(schema['const']);
  if (Array.isArray(schema['enum'])) return oneOf(schema['enum'].map((v) => JSON.stringify(v)));
  const branches = (schema['anyOf'] ?? schema['oneOf']) as Schema[] | undefined;
  if (Array.isArray(branches)) {
    if (branches.every((b) => 'const' in b)) return oneOf(branches.map((b) => JSON.stringify(b['const'])));
    return branches.map(describeSchema).join(', or ');
  }
  switch (schema['type']) {
    case 'null':
      return 'null';
    case 'boolean':
      return 'true or false';
    case 'integer':
      return `an integer${range(schema['minimum'], schema['maximum'])}`;
    case 'number':
      return `a number${range(schema['minimum'], schema['maximum'])}`;
    case 'string':
      return describeString(schema);
    case 'array': {
      const items = schema['items'] as Schema | undefined;
      const count = between(schema['minItems'], schema['maxItems'], 'entries', 'entry');
      return `a list${count ? ` of ${count}` : ''}${items ? `, each ${describeSchema(items)}` : ''}`;
    }
    case 'object':
      return 'a JSON object';
    default:
      return 'a valid value';
  }
}

function oneOf(values: string[]): string {
  if (values.length === 1) return values[0]!;
  return `one of ${values.slice(0, -1).join(', ')} or ${values.at(-1)}`;
}

function range(min: unknown, max: unknown): string {
  if (typeof min === 'number' && typeof max === 'number') return ` from ${min} to ${max}`;
  if (typeof min === 'number') return ` of at least ${min}`;
  if (typeof max === 'number') return ` of at most ${max}`;
  return '';
}

/** "1-255 characters", "at most 100 characters"…; '' without bounds. */
function between(min: unknown, max: unknown, plural: string, singular: string): string {
  const lo = typeof min === 'number' && min > 0 ? min : null;
  const hi = typeof max === 'number' ? max : null;
  if (lo !== null && hi !== null) return `${lo}-${hi} ${plural}`;
  if (hi !== null) return `at most ${hi} ${hi === 1 ? singular : plural}`;
  if (lo !== null) return `at least ${lo} ${lo === 1 ? singular : plural}`;
  return '';
}

function describeString(schema: Schema): string {
  if (schema['format'] === 'date-time') {
    return 'an RFC 3339 date-time such as 2026-01-31T12:00:00Z';
  }
  const length = between(schema['minLength'], schema['maxLength'], 'characters', 'character');
  const pattern = typeof schema['pattern'] === 'string' ? ` matching ${schema['pattern']}` : '';
  return `a string${length ? ` of ${length}` : ''}${pattern}`;
}

/** How a field is named in the sentence: `url`, `events[2]`, `query parameter limit`, `header idempotency-key`. */
function fieldName(part: Part, instancePath: string): string {
  const segments = instancePath.split('/').slice(1).map(unescapePointer);
  if (segments.length === 0) return part === 'querystring' ? 'the query string' : part;
  const name = segments
    .map((s, i) => (i > 0 && /^\d+$/.test(s) ? `[${s}]` : `${i > 0 ? '.' : ''}${s}`))
    .join('');
  if (part === 'querystring') return `query parameter ${name}`;
  if (part === 'headers') return `header ${name}`;
  if (part === 'params') return `path parameter ${name}`;
  return name;
}

function unescapePointer(segment: string): string {
  return segment.replace(/~1/g, '/').replace(/~0/g, '~');
}

function fieldList(schema: Schema | undefined): string[] {
  const properties = schema?.['properties'];
  return properties && typeof properties === 'object' ? Object.keys(properties) : [];
}

function unknownField(part: Part, error: ErrorObject): string {
  const name = String((error.params as { additionalProperty?: unknown }).additionalProperty);
  const allowed = fieldList(error.parentSchema as Schema | undefined);
  const where = fieldName(part, error.instancePath);
  const kind = part === 'querystring' ? 'parameter' : 'field';
  if (allowed.length === 0) return `${where} has an unknown ${kind} ${JSON.stringify(name)}; it takes none`;
  return `${where} has an unknown ${kind} ${JSON.stringify(name)}; allowed ${kind}s are ${allowed.join(', ')}`;
}

function missingField(part: Part, error: ErrorObject): string {
  const name = String((error.params as { missingProperty?: unknown }).missingProperty);
  const parent = error.parentSchema as Schema | undefined;
  const fieldSchema = (parent?.['properties'] as Record<string, Schema> | undefined)?.[name];
  const where = fieldName(part, error.instancePath);
  const path = `${error.instancePath}/${name}`;
  const what = fieldSchema ? `; ${fieldName(part, path)} must be ${describeSchema(fieldSchema)}` : '';
  return `${where} is missing the required ${part === 'headers' ? 'header' : 'field'} ${JSON.stringify(name)}${what}`;
}

/**
 * The sentence for Ajv's errors of one request part. With `allErrors` off Ajv stops at the first
 * field that fails, but a union reports each branch and then itself; the union's error (the last one
 * at the shortest path) carries the whole field's schema, which is what the sentence describes.
 * Needs Ajv's `verbose` option, which puts each failing schema (`parentSchema`) in its error.
 */
export function validationMessage(part: Part, errors: readonly ErrorObject[]): string {
  const special = errors.find((e) =>
    ['additionalProperties', 'required', 'minProperties'].includes(e.keyword),
  );
  if (special?.keyword === 'additionalProperties') return unknownField(part, special);
  if (special?.keyword === 'required') return missingField(part, special);
  if (special?.keyword === 'minProperties') {
    const fields = fieldList(special.parentSchema as Schema | undefined);
    return `${fieldName(part, special.instancePath)} must have at least one of the fields ${fields.join(', ')}`;
  }
  const shortest = Math.min(...errors.map((e) => e.instancePath.length));
  const atField = errors.filter((e) => e.instancePath.length === shortest);
  const error = atField.findLast((e) => e.keyword === 'anyOf' || e.keyword === 'oneOf') ?? atField[0];
  if (!error) return `${part} is not valid`;
  const schema = error.parentSchema as Schema | undefined;
  const accepts = schema ? describeSchema(schema) : 'valid';
  return `${fieldName(part, error.instancePath)} must be ${accepts}`;
}
