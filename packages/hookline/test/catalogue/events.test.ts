import { describe, expect, it } from 'vitest';
import { EVENT_TYPES, isEventType } from '../../src/catalogue/index.js';
import { SPEC_EVENTS } from '../helpers/spec-catalogue.js';

describe('EVENT_TYPES', () => {
  it('has exactly 26 entries', () => {
    expect(EVENT_TYPES).toHaveLength(26);
  });

  it('has no duplicates', () => {
    expect(new Set(EVENT_TYPES).size).toBe(EVENT_TYPES.length);
  });

  it('is exactly the spec §6 list', () => {
    expect([...EVENT_TYPES].sort()).toEqual([...SPEC_EVENTS].sort());
  });

  it('follows <object>.<action> naming', () => {
    for (const name of EVENT_TYPES) expect(name).toMatch(/^[a-zA-Z]+(\.[a-z_]+)+$/);
  });
});

describe('isEventType', () => {
  it.each(SPEC_EVENTS)('accepts %s', (name) => {
    expect(isEventType(name)).toBe(true);
  });

  it.each([
    '',
    'user',
    'user.',
    'user.*',
    '*',
    'User.created',
    'USER.CREATED',
    ' user.created',
    'user.created ',
    'user.created\n',
    'user.purged',
    'organization.auth_policy',
    'organizationMembership',
    'organizationInvitation.updated',
    'connection.created',
    'user..created',
    'toString',
    'constructor',
    '__proto__',
  ])('rejects %j', (name) => {
    expect(isEventType(name)).toBe(false);
  });
});
