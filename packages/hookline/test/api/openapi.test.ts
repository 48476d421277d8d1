// /openapi.json is a valid OpenAPI 3.1 document (checked by an OpenAPI schema validator library), and
// its `webhooks` describe every catalogue event as a subscriber receives it (docs/contract.md §4.5, §5).
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formatsPlugin from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { SPEC_EVENTS } from '../helpers/spec-catalogue.js';

const addFormats = formatsPlugin as unknown as (ajv: Ajv2020) => Ajv2020;

interface Parameter {
  name: string;
  in: string;
  required: boolean;
  schema: Record<string, unknown>;
  example: unknown;
}
interface WebhookPost {
  summary: string;
  description: string;
  parameters: Parameter[];
  requestBody: { content: { 'application/json': { schema: Record<string, unknown>; example: unknown } } };
  responses: Record<string, unknown>;
}
interface Document {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
  webhooks: Record<string, { post: WebhookPost }>;
}

describe('GET /openapi.json', () => {
  let t: TestService;
  let doc: Document;
  beforeAll(async () => {
    // The document does not depend on the store.
    t = await startTestService('sqlite');
    const res = await t.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    doc = res.json() as Document;
  });
  afterAll(async () => t.close());

  it('is valid OpenAPI 3.1', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 1)?.slice(0, 2000)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('would refuse a broken document, so the check above can fail', async () => {
    const broken = structuredClone(doc) as unknown as Record<string, unknown>;
    (broken['webhooks'] as Record<string, unknown>)['user.created'] = { post: { responses: 'none' } };
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it('documents GET /v1/event-types', () => {
    expect(doc.paths['/v1/event-types']).toHaveProperty('get');
    expect(doc.paths['/v1/event-types']!['get']!.responses).toHaveProperty('200');
  });

  it('has one webhook per catalogue event', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual([...SPEC_EVENTS].sort());
  });

  describe.each([...SPEC_EVENTS])('webhook %s', (name) => {
    it('has the headers a subscriber receives', () => {
      const post = doc.webhooks[name]!.post;
      expect(post.parameters.map((p) => `${p.in}:${p.name}`)).toEqual([
        'header:hook-id',
        'header:hook-timestamp',
        'header:hook-signature',
        'header:service-webhook-event',
        'header:user-agent',
      ]);
      for (const p of post.parameters) expect(p.required).toBe(true);
      expect(post.parameters.find((p) => p.name === 'service-webhook-event')!.schema).toEqual({
        const: name,
      });
    });

    it('has a body {type, data} whose example validates against its schema', () => {
      const content = doc.webhooks[name]!.post.requestBody.content['application/json'];
      const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
      const validate = ajv.compile(content.schema);
      expect(validate(content.example), JSON.stringify(validate.errors)).toBe(true);
      expect((content.example as { type: string }).type).toBe(name);
      expect(validate({ type: name === 'user.created' ? 'user.updated' : 'user.created', data: {} })).toBe(
        false,
      );
      expect(validate({ type: name })).toBe(false);
    });
  });
});
