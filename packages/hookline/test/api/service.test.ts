// The service routes of docs/contract.md §4.4: health, readiness, metrics, the OpenAPI document, and the answer
// for a route that does not exist.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';
import { STORE_KINDS } from '../helpers/stores.js';
import { expectError } from './support.js';

/** Every /v1 route this app registers (admin routes are mounted by a later layer, if at all). */
const V1_ROUTES: Record<string, string[]> = {
  '/v1/webhooks': ['get', 'post'],
  '/v1/webhooks/{id}': ['delete', 'get', 'patch'],
  '/v1/webhooks/{id}/restore': ['post'],
  '/v1/webhooks/{id}/rotate-secret': ['post'],
  '/v1/events': ['post'],
  '/v1/event-types': ['get'],
};
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

interface Operation {
  parameters?: { in: string; name: string; required?: boolean }[];
  requestBody?: { content: Record<string, { schema: unknown }> };
  responses: Record<string, unknown>;
  security?: unknown[];
}
interface OpenApi {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
}

/** Every `$ref` string anywhere in a JSON value. */
function refs(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => refs(v, out));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

describe.each(STORE_KINDS)('service routes on %s', (kind) => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService(kind);
  });
  afterAll(async () => t.close());

  it('GET /healthz answers 200 without a key', async () => {
    const res = await t.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });

  it('GET / redirects to the console without a key, with or without a wrong one', async () => {
    for (const headers of [{}, { authorization: 'Bearer not-a-key' }]) {
      for (const method of ['GET', 'HEAD'] as const) {
        const res = await t.inject({ method, url: '/', headers });
        expect(res.statusCode, method).toBe(302);
        expect(res.headers.location).toBe('/console');
      }
    }
    // Only the root: another unknown path is still the API's 404.
    expect((await t.inject({ method: 'GET', url: '/nothing-here' })).statusCode).toBe(404);
  });

  it('GET /readyz answers 200 when the database is reachable', async () => {
    const res = await t.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ready' });
  });

  it('GET /metrics answers Prometheus text with hookline_ metrics that follow the service', async () => {
    const scrape = async () => {
      const res = await t.inject({ method: 'GET', url: '/metrics' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^text\/plain/);
      return res.body;
    };
    const value = (text: string, series: string) => {
      const line = text.split('\n').find((l) => l.startsWith(`${series} `));
      expect(line, series).toBeDefined();
      return Number(line!.slice(series.length + 1));
    };
    const before = await scrape();
    for (const name of [
      'hookline_events_emitted_total',
      'hookline_emit_duration_seconds',
      'hookline_delivery_attempts_total',
      'hookline_queue_depth',
      'hookline_dead_letters',
      'hookline_dead_letters_awaiting',
    ]) {
      expect(before).toContain(`# TYPE ${name} `);
    }
    const emitted = value(before, 'hookline_events_emitted_total');
    const awaiting = value(before, 'hookline_queue_depth{state="awaiting_fanout"}');
    const res = await t.call('POST', '/v1/events', t.keys.producer, {
      tenant_id: 'acme',
      type: 'user.updated',
      data: {},
    });
    expect(res.statusCode).toBe(202);
    const after = await scrape();
    expect(value(after, 'hookline_events_emitted_total')).toBe(emitted + 1);
    // On SQLite the emit fans out to a tenant's few endpoints itself (here none): nothing awaits it.
    expect(value(after, 'hookline_queue_depth{state="awaiting_fanout"}')).toBe(
      awaiting + (kind === 'sqlite' ? 0 : 1),
    );
    expect(value(after, 'hookline_emit_duration_seconds_count')).toBe(
      value(before, 'hookline_emit_duration_seconds_count') + 1,
    );
  });

  describe('GET /openapi.json', () => {
    let doc: OpenApi;
    beforeAll(async () => {
      const res = await t.inject({ method: 'GET', url: '/openapi.json' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      doc = res.json() as OpenApi;
    });

    it('is an OpenAPI 3.1 document', () => {
      expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
      expect(doc.info.title).toBe('hookline');
      expect(typeof doc.info.version).toBe('string');
      expect(doc.components.securitySchemes).toHaveProperty('bearer');
    });

    it('lists every /v1 route of this app with its methods', () => {
      for (const [path, methods] of Object.entries(V1_ROUTES)) {
        expect(doc.paths, path).toHaveProperty([path]);
        const documented = Object.keys(doc.paths[path]!).filter((m) => HTTP_METHODS.includes(m));
        for (const method of methods) expect(documented, path).toContain(method);
      }
      // And documents nothing the app does not serve.
      for (const [path, operations] of Object.entries(doc.paths)) {
        for (const method of Object.keys(operations).filter((m) => HTTP_METHODS.includes(m))) {
          const url = path.replace(/\{(\w+)\}/g, ':$1');
          expect(
            t.service.app!.hasRoute({ method: method.toUpperCase() as 'GET', url }),
            `${method} ${path}`,
          ).toBe(true);
        }
      }
      // The service routes are there too.
      for (const path of ['/healthz', '/readyz', '/metrics']) expect(doc.paths[path]).toHaveProperty('get');
    });

    it('documents the request schemas that validate requests', () => {
      const create = doc.paths['/v1/webhooks']!['post']!;
      const createBody = JSON.stringify(create.requestBody);
      for (const word of ['"url"', '"events"', '"description"', '2048', '1024', '50']) {
        expect(createBody).toContain(word);
      }
      const list = doc.paths['/v1/webhooks']!['get']!;
      expect(list.parameters?.map((p) => `${p.in}:${p.name}`).sort()).toEqual([
        'query:cursor',
        'query:limit',
        'query:status',
        'query:tenant_id',
      ]);
      const get = doc.paths['/v1/webhooks/{id}']!['get']!;
      expect(get.parameters).toContainEqual(
        expect.objectContaining({ in: 'path', name: 'id', required: true }),
      );
      const rotate = doc.paths['/v1/webhooks/{id}/rotate-secret']!['post']!;
      expect(JSON.stringify(rotate.requestBody)).toContain('grace_period_seconds');
      const emit = doc.paths['/v1/events']!['post']!;
      expect(JSON.stringify(emit.requestBody)).toContain('tenant_id');
      expect(emit.parameters).toContainEqual(
        expect.objectContaining({ in: 'header', name: 'idempotency-key' }),
      );
      expect(Object.keys(emit.responses)).toEqual(
        expect.arrayContaining(['202', '400', '401', '403', '413']),
      );
      expect(Object.keys(create.responses)).toEqual(expect.arrayContaining(['201', '400', '401', '403']));
    });

    it('marks the /v1 routes as needing a bearer key', () => {
      for (const [path, methods] of Object.entries(V1_ROUTES)) {
        for (const method of methods) {
          expect(doc.paths[path]![method]!.security, `${method} ${path}`).toEqual([{ bearer: [] }]);
        }
      }
    });

    it('resolves every $ref to a component of the document', () => {
      const all = refs(doc);
      expect(all.length).toBeGreaterThan(0);
      for (const ref of all) {
        expect(ref).toMatch(/^#\/components\/schemas\//);
        expect(doc.components.schemas).toHaveProperty([ref.slice('#/components/schemas/'.length)]);
      }
    });
  });

  it('answers an unknown route with a 404 JSON error', async () => {
    for (const url of [
      '/nope',
      '/v1',
      '/v2/webhooks',
      '/v1/webhook',
      '/v1/webhooks/x/y/z',
      '/v1/admin/unknown',
    ]) {
      const res = await t.inject({
        method: 'GET',
        url,
        headers: { authorization: `Bearer ${t.keys.tenant}` },
      });
      expectError(res, 404, 'not_found');
    }
    const post = await t.call('POST', '/nope', t.keys.tenant, { url: 'https://a.example/', events: ['*'] });
    expectError(post, 404, 'not_found');
    expect((post.json() as { error: { message: string } }).error.message).toBe('no route for POST /nope');
  });
});
