import { describe, expect, it } from 'vitest';
import { EVENT_TYPES, isEventType } from '../../src/catalogue/index.js';

// Written out again on purpose: the test must fail if the catalogue drifts from spec §6.
const SPEC_EVENTS = [
  'user.created',
  'user.updated',
  'user.deleted',
  'user.restored',
  'user.banned',
  'user.unbanned',
  'user.deactivated',
  'organization.created',
  'organization.updated',
  'organization.deleted',
  'organization.restored',
  'organization.auth_policy.updated',
  'organization.delivery_channels.updated',
  'organization.social_providers.updated',
  'organization.outbound_saml_app.created',
  'organization.outbound_saml_app.deleted',
  'organization.scim_target.created',
  'organization.scim_target.deleted',
  'organizationMembership.created',
  'organizationMembership.updated',
  'organizationMembership.deleted',
  'organizationMembership.restored',
  'organizationInvitation.created',
  'organizationInvitation.accepted',
  'organizationInvitation.revoked',
  'connection.saml_certificate_renewed',
];

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
