// The event catalogue written out again from the spec (§6), on purpose not imported from src: the
// suites must fail if the catalogue drifts from the specification. Grouped by object, as the
// wildcards' expected members.
export const USER_EVENTS = [
  'user.created',
  'user.updated',
  'user.deleted',
  'user.restored',
  'user.banned',
  'user.unbanned',
  'user.deactivated',
];
export const ORGANIZATION_EVENTS = [
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
];
export const MEMBERSHIP_EVENTS = [
  'organizationMembership.created',
  'organizationMembership.updated',
  'organizationMembership.deleted',
  'organizationMembership.restored',
];
export const INVITATION_EVENTS = [
  'organizationInvitation.created',
  'organizationInvitation.accepted',
  'organizationInvitation.revoked',
];
export const CONNECTION_EVENTS = ['connection.saml_certificate_renewed'];

export const SPEC_EVENTS: readonly string[] = [
  ...USER_EVENTS,
  ...ORGANIZATION_EVENTS,
  ...MEMBERSHIP_EVENTS,
  ...INVITATION_EVENTS,
  ...CONNECTION_EVENTS,
];
