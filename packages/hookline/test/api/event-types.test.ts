// GET /v1/event-types (docs/contract.md §4.5): the whole catalogue for any authenticated role, in the
// one shape { data: [{ name, description, schema, example }] }.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { SPEC_EVENTS } from '../helpers/spec-catalogue.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { expectError } from './support.js';

interface Entry {
  name: string;
  description: string;
  schema: { type: string; required: string[]; properties: Record<string, unknown> };
  example: Record<string, unknown>;
}

describe.each(STORE_KINDS)('GET /v1/event-types on %s', (kind) => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService(kind);
  });
  afterAll(async () => t.close());

  it.each(['tenant', 'producer', 'instance_manager'] as const)(
    'answers a %s key with all 26 events',
    async (role) => {
      const res = await t.call('GET', '/v1/event-types', t.keys[role]);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as { data: Entry[] };
      expect(Object.keys(body)).toEqual(['data']);
      expect(body.data.map((e) => e.name).sort()).toEqual([...SPEC_EVENTS].sort());
      for (const entry of body.data) {
        expect(Object.keys(entry)).toEqual(['name', 'description', 'schema', 'example']);
        expect(entry.description.length).toBeGreaterThan(10);
        expect(entry.schema.type).toBe('object');
      }
      const created = body.data.find((e) => e.name === 'user.created')!;
      expect(created.schema.required).toEqual(['userId']);
      expect(created.example['userId']).toMatch(/^user_/);
    },
  );

  it('refuses a request without a key', async () => {
    expectError(await t.call('GET', '/v1/event-types', null), 401, 'unauthorized');
  });

  it('answers every example accepted by POST /v1/events', async () => {
    const res = await t.call('GET', '/v1/event-types', t.keys.producer);
    for (const entry of (res.json() as { data: Entry[] }).data) {
      const emit = await t.call('POST', '/v1/events', t.keys.producer, {
        tenant_id: 'acme',
        type: entry.name,
        data: entry.example,
      });
      expect(emit.statusCode, `${entry.name}: ${emit.body}`).toBe(202);
    }
  });
});
