import { describe, expect, it } from 'vitest';
import {
  EVENT_TYPES,
  USER_ID_PATTERN,
  validateEventData,
  type EventType,
} from '../../src/catalogue/index.js';

const NOT_OBJECTS: [string, unknown][] = [
  ['null', null],
  ['undefined', undefined],
  ['an array', []],
  ['an array of objects', [{ userId: 'user_1' }]],
  ['a string', 'user_1'],
  ['a number', 42],
  ['a boolean', true],
  ['a Date', new Date(0)],
  ['a Map', new Map()],
  ['a class instance', new (class Payload {})()],
  ['a function', () => ({})],
];

const cyclic: Record<string, unknown> = { a: 1 };
cyclic['self'] = cyclic;
const shared = { x: 1 };

const NON_JSON_INSIDE: [string, unknown, string][] = [
  ['nested undefined array item', { a: { b: [undefined] } }, 'data.a.b[0]'],
  ['NaN', { n: Number.NaN }, 'data.n'],
  ['Infinity', { n: Number.POSITIVE_INFINITY }, 'data.n'],
  ['function', { f: () => 1 }, 'data.f'],
  ['bigint', { b: 1n }, 'data.b'],
  ['symbol', { s: Symbol('s') }, 'data.s'],
  ['nested Date', { a: { when: new Date(0) } }, 'data.a.when'],
  ['undefined in array', { list: [1, undefined] }, 'data.list[1]'],
  // eslint-disable-next-line no-sparse-arrays -- the hole is the point: JSON turns it into null
  ['sparse array', { list: [1, , 3] }, 'data.list[1]'],
  ['cycle', cyclic, 'data.self'],
];

describe('validateEventData: data must be a JSON object for every type', () => {
  const cases = EVENT_TYPES.flatMap((type) =>
    NOT_OBJECTS.map(([label, data]) => [type, label, data] as const),
  );
  it.each(cases)('%s refuses %s', (type, _label, data) => {
    expect(validateEventData(type, data)).toBe('data must be a JSON object');
  });
});

describe('validateEventData: nested values must be JSON', () => {
  it.each(NON_JSON_INSIDE)('refuses %s', (_label, data, path) => {
    expect(validateEventData('organization.updated', data)).toBe(`${path} is not a JSON value`);
  });

  it('accepts the same object referenced twice (not a cycle)', () => {
    expect(validateEventData('organization.updated', { a: shared, b: [shared, shared] })).toBeNull();
  });

  it('accepts properties set to undefined, which JSON omits', () => {
    expect(validateEventData('organization.updated', { a: undefined, b: { c: undefined } })).toBeNull();
  });

  it('accepts an object with a null prototype', () => {
    const data = Object.create(null) as Record<string, unknown>;
    data['k'] = 'v';
    expect(validateEventData('organization.updated', data)).toBeNull();
  });
});

describe('validateEventData: every type other than user.created accepts any JSON object', () => {
  const others = EVENT_TYPES.filter((t): t is Exclude<EventType, 'user.created'> => t !== 'user.created');
  const payloads: unknown[] = [
    {},
    { id: 'org_1' },
    { nested: { deep: [1, 'two', null, true, { x: -1.5 }] } },
    { userId: 42 },
    JSON.parse('{"__proto__": {"polluted": true}}') as unknown,
  ];
  const cases = others.flatMap((type) => payloads.map((data) => [type, data] as const));
  it.each(cases)('%s accepts %j', (type, data) => {
    expect(validateEventData(type, data)).toBeNull();
  });
});

describe('validateEventData: user.created', () => {
  it.each([
    'user_1',
    'user_a',
    'user_01HZX3K4Q8F5V6J7M8N9P0R1S2',
    'user_3f2b1c9e-8d7a-4b6c-9e5f-1a2b3c4d5e6f',
    'user_V1StGXR8_Z5jdHi6B-myT',
    'user__',
    'user_-',
    `user_${'a'.repeat(255)}`,
  ])('accepts userId %s', (userId) => {
    expect(validateEventData('user.created', { userId })).toBeNull();
    expect(validateEventData('user.created', { userId, email: 'a@example.com', extra: [1] })).toBeNull();
  });

  const shapeMessage =
    'data.userId must be shaped user_<id>, where <id> is 1-255 characters of A-Z, a-z, 0-9, _ or -';

  it.each([
    ['missing', {}, 'data.userId is required for user.created'],
    ['explicitly undefined', { userId: undefined }, 'data.userId is required for user.created'],
    ['null', { userId: null }, 'data.userId must be a string'],
    ['a number', { userId: 1 }, 'data.userId must be a string'],
    ['an object', { userId: { id: 'user_1' } }, 'data.userId must be a string'],
    ['an array', { userId: ['user_1'] }, 'data.userId must be a string'],
    ['empty', { userId: '' }, shapeMessage],
    ['prefix only', { userId: 'user_' }, shapeMessage],
    ['no prefix', { userId: '123' }, shapeMessage],
    ['wrong prefix', { userId: 'usr_123' }, shapeMessage],
    ['capitalised prefix', { userId: 'User_123' }, shapeMessage],
    ['dash instead of underscore', { userId: 'user-123' }, shapeMessage],
    ['too long', { userId: `user_${'a'.repeat(256)}` }, shapeMessage],
    ['space', { userId: 'user_12 3' }, shapeMessage],
    ['leading space', { userId: ' user_123' }, shapeMessage],
    ['trailing newline', { userId: 'user_123\n' }, shapeMessage],
    ['dot', { userId: 'user_1.2' }, shapeMessage],
    ['slash', { userId: 'user_1/2' }, shapeMessage],
    ['non-ASCII', { userId: 'user_é' }, shapeMessage],
  ] as const)('refuses userId %s', (_label, data, message) => {
    expect(validateEventData('user.created', data)).toBe(message);
  });

  it('still requires an object', () => {
    expect(validateEventData('user.created', 'user_1')).toBe('data must be a JSON object');
  });

  it('USER_ID_PATTERN is anchored', () => {
    expect(USER_ID_PATTERN.test('xuser_1')).toBe(false);
    expect(USER_ID_PATTERN.test('user_1x!')).toBe(false);
  });
});
