import { describe, expect, it } from 'vitest';
import {
  EVENT_TYPES,
  WILDCARDS,
  findInvalidEventFilters,
  isValidEventFilter,
  isWildcard,
  matchesEventFilter,
} from '../../src/catalogue/index.js';
import {
  MEMBERSHIP_EVENTS,
  ORGANIZATION_EVENTS,
  SPEC_EVENTS as ALL_EVENTS,
  USER_EVENTS,
} from '../helpers/spec-catalogue.js';

// Expected members of each wildcard, listed by hand from spec §6 rather than derived by prefix,
// so the test does not share the implementation's logic.
const EXPECTED_MEMBERS: Record<string, readonly string[]> = {
  'user.*': USER_EVENTS,
  'organization.*': ORGANIZATION_EVENTS,
  'organizationMembership.*': MEMBERSHIP_EVENTS,
  '*': ALL_EVENTS,
};

const WILDCARD_MATRIX = Object.entries(EXPECTED_MEMBERS).flatMap(([wildcard, members]) =>
  EVENT_TYPES.map((event) => [wildcard, event, members.includes(event)] as const),
);

const INVALID_FILTERS = [
  '',
  ' ',
  'organizationInvitation.*',
  'connection.*',
  'org*',
  'organization*',
  'user.',
  'user',
  'user.**',
  'user.*.*',
  '*.*',
  '**',
  '.*',
  'user.created.*',
  'organization.auth_policy.*',
  'organization.scim_target.*',
  'USER.created',
  'User.*',
  'user.Created',
  ' user.created',
  'user.created ',
  '\tuser.*',
  '* ',
  'user.purged',
  'organizationMembership',
  'organizationmembership.*',
  'user.created,user.updated',
  'toString',
  '__proto__',
];

describe('catalogue sanity for the fixture', () => {
  it('the hand-written lists cover the 26 events exactly once', () => {
    expect(ALL_EVENTS).toHaveLength(26);
    expect([...ALL_EVENTS].sort()).toEqual([...EVENT_TYPES].sort());
  });

  it('covers every wildcard', () => {
    expect(Object.keys(EXPECTED_MEMBERS).sort()).toEqual([...WILDCARDS].sort());
  });
});

describe('matchesEventFilter: every wildcard against every event', () => {
  it.each(WILDCARD_MATRIX)('%s matches %s: %s', (wildcard, event, expected) => {
    expect(matchesEventFilter([wildcard], event)).toBe(expected);
  });
});

describe('matchesEventFilter: exact names', () => {
  it.each(EVENT_TYPES.map((e) => [e] as const))('%s matches only itself', (event) => {
    for (const other of EVENT_TYPES) {
      expect(matchesEventFilter([event], other)).toBe(other === event);
    }
  });
});

describe('matchesEventFilter: lists', () => {
  it.each([
    [[], 'user.created', false],
    [['user.*', 'organizationInvitation.accepted'], 'organizationInvitation.accepted', true],
    [['user.*', 'organizationInvitation.accepted'], 'organizationInvitation.revoked', false],
    [['user.*', 'organizationInvitation.accepted'], 'user.banned', true],
    [['organization.*'], 'organizationMembership.created', false],
    [['organization.*'], 'organizationInvitation.created', false],
    [['organization.*', 'organizationMembership.*'], 'organizationMembership.deleted', true],
    [['connection.saml_certificate_renewed'], 'connection.saml_certificate_renewed', true],
    // Invalid filters that slipped into a stored list never match anything.
    [['organizationInvitation.*'], 'organizationInvitation.created', false],
    [['connection.*'], 'connection.saml_certificate_renewed', false],
    [['org*'], 'organization.created', false],
    [['USER.created'], 'user.created', false],
    [['user.created '], 'user.created', false],
    // Unknown event types match nothing, even the catch-all.
    [['*'], 'user.purged', false],
    [['user.*'], 'user.purged', false],
    [['*'], '', false],
    [['*'], 'User.created', false],
    [['user.purged'], 'user.purged', false],
  ] as const)('%j against %s -> %s', (filters, event, expected) => {
    expect(matchesEventFilter(filters, event)).toBe(expected);
  });
});

describe('isValidEventFilter', () => {
  it.each([...ALL_EVENTS, ...Object.keys(EXPECTED_MEMBERS)])('accepts %s', (filter) => {
    expect(isValidEventFilter(filter)).toBe(true);
  });

  it.each(INVALID_FILTERS)('rejects %j', (filter) => {
    expect(isValidEventFilter(filter)).toBe(false);
  });
});

describe('isWildcard', () => {
  it.each([
    ['user.*', true],
    ['organization.*', true],
    ['organizationMembership.*', true],
    ['*', true],
    ['organizationInvitation.*', false],
    ['user.created', false],
    ['', false],
  ] as const)('%j -> %s', (s, expected) => {
    expect(isWildcard(s)).toBe(expected);
  });
});

describe('findInvalidEventFilters', () => {
  it.each([
    [[], []],
    [['*'], []],
    [['user.*', 'organizationInvitation.accepted'], []],
    [[...ALL_EVENTS, ...WILDCARDS], []],
    [
      ['user.*', 'connection.*', 'org*'],
      ['connection.*', 'org*'],
    ],
    [
      ['org*', 'user.created', 'org*', 'USER.created'],
      ['org*', 'USER.created'],
    ],
    [[''], ['']],
    [INVALID_FILTERS, INVALID_FILTERS],
  ] as const)('%j -> %j', (list, expected) => {
    expect(findInvalidEventFilters(list)).toEqual(expected);
  });
});
