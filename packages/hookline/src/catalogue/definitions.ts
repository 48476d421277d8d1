// The event catalogue as data: every event's description, the JSON Schema of its `data`, and an example.
// The one source of truth for GET /v1/event-types, /openapi.json's `webhooks`, docs/events.md (generated
// by scripts/events-doc.ts), the TypeScript types of `data` (catalogue/types.ts) and the rule `user.created`
// enforces on emit (payload-rules.ts). The schemas describe what the identity product sends; they allow
// more fields (a subscriber must ignore what it does not know), and on emit only the fields listed in
// `enforcedOnEmit` are checked, so existing producers keep working (docs/contract.md §4.2).
import { Type, type Static, type TObject, type TProperties } from '@sinclair/typebox';
import type { EventType } from './events.js';
import {
  ConnectionId,
  Email,
  InvitationId,
  MembershipId,
  OrganizationId,
  OutboundSamlAppId,
  Role,
  ScimTargetId,
  Timestamp,
  UpdatedFields,
  UserId,
} from './fields.js';

export interface EventDefinition<S extends TObject = TObject> {
  description: string;
  /** The JSON Schema of `data`. */
  schema: S;
  /** A `data` that validates against `schema` (checked by the tests with a JSON Schema validator). */
  example: Static<S>;
  /** Fields whose presence and schema every emit must satisfy; all other fields are documentation. */
  enforcedOnEmit: readonly string[];
}

/** Optional fields; the required ones stay required. Any other field is allowed (additionalProperties). */
function data<P extends TProperties>(properties: P) {
  return Type.Object(properties, { additionalProperties: true });
}

/** Ties the example's type to the schema, so a wrong example does not compile. */
function event<S extends TObject>(
  description: string,
  schema: S,
  example: Static<S>,
  enforcedOnEmit: readonly string[] = [],
): EventDefinition<S> {
  return { description, schema, example, enforcedOnEmit };
}

// Ids in the examples: made up, shaped like the ones the identity product hands out.
const USER = 'user_2fK8q1ZcW9mN4xYb';
const ORG = 'org_7Hq2LmX9pR4tVb1c';

const user = () => data({ userId: UserId });
const organization = () => data({ organizationId: OrganizationId });
const membership = () =>
  data({
    organizationId: OrganizationId,
    userId: UserId,
    membershipId: Type.Optional(MembershipId),
    role: Type.Optional(Role),
  });
const invitation = () =>
  data({
    organizationId: OrganizationId,
    invitationId: InvitationId,
    email: Type.Optional(Email),
    role: Type.Optional(Role),
  });
const membershipExample = {
  organizationId: ORG,
  userId: USER,
  membershipId: 'mem_3Zp8Kd1Lq0Wc',
  role: 'admin',
};
const invitationExample = {
  organizationId: ORG,
  invitationId: 'inv_9Rt4Yb2Nc8Xe',
  email: 'ada@example.com',
  role: 'member',
};

export const EVENT_DEFINITIONS = {
  'user.created': event(
    'A user signed up or was created by an administrator or an import. The only event whose data hookline checks on emit: userId is required and shaped user_<id>.',
    data({ userId: UserId, email: Type.Optional(Email) }),
    { userId: USER, email: 'ada@example.com' },
    ['userId'],
  ),
  'user.updated': event(
    "A user's profile changed (name, email, metadata…).",
    data({ userId: UserId, updatedFields: Type.Optional(UpdatedFields) }),
    { userId: USER, updatedFields: ['email', 'name'] },
  ),
  'user.deleted': event('A user was deleted; it can be restored.', user(), { userId: USER }),
  'user.restored': event('A deleted user was restored.', user(), { userId: USER }),
  'user.banned': event('A user was banned: they can no longer sign in.', user(), { userId: USER }),
  'user.unbanned': event('A ban was lifted: the user can sign in again.', user(), { userId: USER }),
  'user.deactivated': event('A user was deactivated (for example for inactivity).', user(), {
    userId: USER,
  }),
  'organization.created': event('An organization was created.', organization(), { organizationId: ORG }),
  'organization.updated': event(
    "An organization's profile changed (name, domains, metadata…).",
    data({ organizationId: OrganizationId, updatedFields: Type.Optional(UpdatedFields) }),
    { organizationId: ORG, updatedFields: ['name'] },
  ),
  'organization.deleted': event('An organization was deleted; it can be restored.', organization(), {
    organizationId: ORG,
  }),
  'organization.restored': event('A deleted organization was restored.', organization(), {
    organizationId: ORG,
  }),
  'organization.auth_policy.updated': event(
    "An organization's authentication policy changed (allowed sign-in methods, MFA…).",
    organization(),
    { organizationId: ORG },
  ),
  'organization.delivery_channels.updated': event(
    'The channels an organization sends its messages through (email, SMS…) changed.',
    organization(),
    { organizationId: ORG },
  ),
  'organization.social_providers.updated': event(
    'The social sign-in providers an organization offers changed.',
    organization(),
    { organizationId: ORG },
  ),
  'organization.outbound_saml_app.created': event(
    'An outbound SAML application was added: the organization now acts as identity provider to it.',
    data({ organizationId: OrganizationId, outboundSamlAppId: OutboundSamlAppId }),
    { organizationId: ORG, outboundSamlAppId: 'osa_5Vn2Qe8Jw1Ta' },
  ),
  'organization.outbound_saml_app.deleted': event(
    'An outbound SAML application was removed from the organization.',
    data({ organizationId: OrganizationId, outboundSamlAppId: OutboundSamlAppId }),
    { organizationId: ORG, outboundSamlAppId: 'osa_5Vn2Qe8Jw1Ta' },
  ),
  'organization.scim_target.created': event(
    'A SCIM target was added: the organization provisions its users to it.',
    data({ organizationId: OrganizationId, scimTargetId: ScimTargetId }),
    { organizationId: ORG, scimTargetId: 'scim_8Lk3Wd6Fh2Pz' },
  ),
  'organization.scim_target.deleted': event(
    'A SCIM target was removed from the organization.',
    data({ organizationId: OrganizationId, scimTargetId: ScimTargetId }),
    { organizationId: ORG, scimTargetId: 'scim_8Lk3Wd6Fh2Pz' },
  ),
  'organizationMembership.created': event(
    'A user became a member of an organization.',
    membership(),
    membershipExample,
  ),
  'organizationMembership.updated': event(
    "A membership changed, for example the member's role.",
    membership(),
    membershipExample,
  ),
  'organizationMembership.deleted': event(
    'A user was removed from an organization; the membership can be restored.',
    membership(),
    membershipExample,
  ),
  'organizationMembership.restored': event(
    'A removed membership was restored.',
    membership(),
    membershipExample,
  ),
  'organizationInvitation.created': event(
    'Someone was invited to join an organization.',
    invitation(),
    invitationExample,
  ),
  'organizationInvitation.accepted': event(
    'An invitation was accepted; userId is the user who accepted it (an organizationMembership.created follows).',
    data({
      organizationId: OrganizationId,
      invitationId: InvitationId,
      userId: Type.Optional(UserId),
      email: Type.Optional(Email),
    }),
    { organizationId: ORG, invitationId: 'inv_9Rt4Yb2Nc8Xe', userId: USER, email: 'ada@example.com' },
  ),
  'organizationInvitation.revoked': event(
    'An invitation was revoked before it was accepted.',
    invitation(),
    invitationExample,
  ),
  'connection.saml_certificate_renewed': event(
    "The signing certificate of an organization's SAML connection was renewed; expiresAt is when the new one expires.",
    data({ organizationId: OrganizationId, connectionId: ConnectionId, expiresAt: Type.Optional(Timestamp) }),
    { organizationId: ORG, connectionId: 'conn_4Gx7Mb0Sa3Ud', expiresAt: '2027-11-28T00:00:00Z' },
  ),
} satisfies Record<EventType, EventDefinition>;

export type EventDefinitions = typeof EVENT_DEFINITIONS;
