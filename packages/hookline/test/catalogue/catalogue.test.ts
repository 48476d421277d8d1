// The catalogue as data (docs/events.md): every event has a description, a JSON Schema of its data that
// a draft 2020-12 validator accepts, and an example valid against it; the ids each family carries.
import { Ajv2020 } from 'ajv/dist/2020.js';
import formatsPlugin from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import {
  CATALOGUE,
  EVENT_TYPES,
  USER_ID_PATTERN,
  catalogueEntry,
  validateEventData,
} from '../../src/catalogue/index.js';
import { EVENT_DEFINITIONS } from '../../src/catalogue/definitions.js';
import { SPEC_EVENTS } from '../helpers/spec-catalogue.js';

const addFormats = formatsPlugin as unknown as (ajv: Ajv2020) => Ajv2020;

/**
 * Strict: an unknown keyword or a schema draft 2020-12 does not define is an error, not ignored, as in
 * a subscriber's Ajv with its defaults.
 */
function strictAjv(): Ajv2020 {
  return addFormats(new Ajv2020({ strict: true, allErrors: true }));
}

const ajv = strictAjv();
const entries = CATALOGUE.map((e) => [e.name, e] as const);

/** The ids each family carries (src/catalogue/definitions.ts, docs/events.md). */
function requiredIds(name: string): string[] {
  if (name.startsWith('user.')) return ['userId'];
  if (name.startsWith('organizationMembership.')) return ['organizationId', 'userId'];
  if (name.startsWith('organizationInvitation.')) return ['organizationId', 'invitationId'];
  if (name.startsWith('organization.')) return ['organizationId'];
  if (name === 'connection.saml_certificate_renewed') return ['organizationId', 'connectionId'];
  throw new Error(`no family for ${name}`);
}

describe('the catalogue', () => {
  it('has the 26 spec events, in the order of EVENT_TYPES', () => {
    expect(CATALOGUE.map((e) => e.name)).toEqual([...EVENT_TYPES]);
    expect([...CATALOGUE.map((e) => e.name)].sort()).toEqual([...SPEC_EVENTS].sort());
    expect(Object.keys(EVENT_DEFINITIONS).sort()).toEqual([...EVENT_TYPES].sort());
  });

  it('is plain JSON: what is served is what JSON.stringify sees', () => {
    expect(JSON.parse(JSON.stringify(CATALOGUE))).toEqual(CATALOGUE);
    for (const entry of CATALOGUE) expect(Object.getOwnPropertySymbols(entry.schema)).toEqual([]);
  });

  it('answers one entry by name', () => {
    expect(catalogueEntry('connection.saml_certificate_renewed').name).toBe(
      'connection.saml_certificate_renewed',
    );
  });

  describe.each(entries)('%s', (name, entry) => {
    it('has a description of a sentence or more', () => {
      expect(entry.description).toMatch(/^[A-Z].{10,}\.$/);
    });

    it('has a draft 2020-12 schema of an object that allows more fields', () => {
      expect(ajv.validateSchema(entry.schema), JSON.stringify(ajv.errors)).toBe(true);
      expect(entry.schema['type']).toBe('object');
      expect(entry.schema['additionalProperties']).toBe(true);
    });

    it('requires the ids its family carries', () => {
      const required = entry.schema['required'] as string[];
      for (const id of requiredIds(name)) expect(required).toContain(id);
      const properties = entry.schema['properties'] as Record<string, { pattern?: string }>;
      // Every userId is the same field, shaped user_<id>.
      if (properties['userId']) expect(properties['userId'].pattern).toBe(USER_ID_PATTERN.source);
    });

    it('has an example that validates against its schema', () => {
      const validate = ajv.compile(entry.schema);
      expect(validate(entry.example), JSON.stringify(validate.errors)).toBe(true);
      // The example is also accepted on emit.
      expect(validateEventData(name, entry.example)).toBeNull();
    });

    it('refuses the example without its ids, so the check above can fail', () => {
      const validate = ajv.compile(entry.schema);
      for (const id of requiredIds(name)) {
        const { [id]: _dropped, ...rest } = entry.example;
        expect(validate(rest), id).toBe(false);
      }
      expect(validate({ ...entry.example, extra: { any: ['thing'] } })).toBe(true);
    });
  });

  it('gives user.created on emit exactly the rule of its schema: userId required and shaped user_<id>', () => {
    const schema = catalogueEntry('user.created').schema;
    expect(schema['required']).toEqual(['userId']);
    expect(EVENT_DEFINITIONS['user.created'].enforcedOnEmit).toEqual(['userId']);
    expect(validateEventData('user.created', {})).toBe('data.userId is required for user.created');
    expect(validateEventData('user.created', { userId: 'usr_1' })).toMatch(
      /^data\.userId must be shaped user_<id>/,
    );
    // Nothing else is enforced on emit: fields the schema describes may be anything, other events' ids may be missing.
    expect(validateEventData('user.created', { userId: 'user_1', email: 5 })).toBeNull();
    for (const name of EVENT_TYPES.filter((n) => n !== 'user.created')) {
      expect(EVENT_DEFINITIONS[name].enforcedOnEmit, name).toEqual([]);
      expect(validateEventData(name, {}), name).toBeNull();
    }
  });
});
