/**
 * The event catalogue of spec §6. This list is the contract: subscribers filter on these
 * exact names and producers may only emit them, so adding or renaming one is an API change.
 */
export const EVENT_TYPES = [
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
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

const EVENT_TYPE_SET: ReadonlySet<string> = new Set(EVENT_TYPES);

export function isEventType(s: string): s is EventType {
  return EVENT_TYPE_SET.has(s);
}
