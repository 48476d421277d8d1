// The fields the identity product puts in events' `data`, as JSON Schema (written with TypeBox, whose
// output is plain JSON Schema; the keywords used here mean the same in draft 2020-12, the dialect of
// OpenAPI 3.1). Shared by every event that carries them, so a field means one thing everywhere.
import { Type, type TString } from '@sinclair/typebox';

/**
 * `data.userId`: `user_<id>`, <id> being 1–255 characters of `[A-Za-z0-9_-]` (the usual id
 * generators: UUIDs, ULIDs, nanoids, integers), URL- and log-safe and bounded in size. The spec
 * (docs/contract.md §4.2) shows only the `user_` prefix; `user.created` enforces this shape on emit.
 */
export const UserId: TString = Type.String({
  pattern: '^user_[A-Za-z0-9_-]{1,255}$',
  description: 'The user, shaped user_<id> (<id>: 1-255 characters of A-Z, a-z, 0-9, _ or -)',
  // Read by catalogue/payload-rules.ts and the API's error messages: the shape in words.
  'x-accepts': 'shaped user_<id>, where <id> is 1-255 characters of A-Z, a-z, 0-9, _ or -',
});

/** An identifier of the identity product's own (an organization, a membership…): opaque text. */
function id(description: string): TString {
  return Type.String({ minLength: 1, maxLength: 255, description });
}

export const OrganizationId = id('The organization');
export const MembershipId = id("The membership: the user's place in the organization");
export const InvitationId = id('The invitation');
export const ConnectionId = id('The SAML connection (an enterprise identity provider of the organization)');
export const OutboundSamlAppId = id('The outbound SAML application (the organization as identity provider)');
export const ScimTargetId = id('The SCIM provisioning target');

export const Email = Type.String({ format: 'email', maxLength: 320, description: 'An email address' });
export const Role = Type.String({
  minLength: 1,
  maxLength: 100,
  description: "The member's role in the organization, as the product names it",
});
export const UpdatedFields = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
  description: 'Names of the fields this change touched (present when the product knows them)',
  maxItems: 100,
});
export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339 date-time' });
