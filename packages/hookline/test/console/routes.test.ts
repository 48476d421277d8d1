// The console's static routes (no browser): the page and its assets are public, typed, framed by a
// strict CSP, and nothing outside the console folder can be reached through them. The admin API
// they talk to refuses tenant keys on every route.
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from '../helpers/service.js';

const CONSOLE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../console');

describe('console routes', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService('sqlite');
  });
  afterAll(async () => t.close());

  it('serves the page without a key, as HTML under a strict Content-Security-Policy', async () => {
    for (const url of ['/console', '/console/', '/console/index.html']) {
      const res = await t.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      const csp = String(res.headers['content-security-policy']);
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).not.toContain('unsafe-eval');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.body).toContain('<script type="module" src="/console/app.js"></script>');
      // Every script is a file (the CSP would block an inline one anyway), and nothing is fetched
      // from another origin: the console works with no network beyond the server itself.
      for (const tag of res.body.match(/<script\b[^>]*>/g) ?? []) expect(tag).toMatch(/\ssrc="\/console\//);
      expect(res.body).not.toMatch(/\s(?:src|href)="(?:https?:)?\/\//);
      expect(res.body).not.toMatch(/\sstyle=/);
    }
  });

  it('serves each asset with its content type', async () => {
    const expected: Record<string, string> = {
      'app.js': 'text/javascript; charset=utf-8',
      'api.js': 'text/javascript; charset=utf-8',
      'charts.js': 'text/javascript; charset=utf-8',
      'styles.css': 'text/css; charset=utf-8',
      'favicon.svg': 'image/svg+xml',
    };
    for (const [name, type] of Object.entries(expected)) {
      const res = await t.inject({ method: 'GET', url: `/console/${name}` });
      expect(res.statusCode, name).toBe(200);
      expect(res.headers['content-type'], name).toBe(type);
      expect(res.headers['content-security-policy']).toBeDefined();
    }
    // Every file in the folder is reachable, so a new module cannot be forgotten by the whitelist.
    for (const name of readdirSync(CONSOLE_DIR)) {
      expect((await t.inject({ method: 'GET', url: `/console/${name}` })).statusCode, name).toBe(200);
    }
  });

  it('answers 404 in the API error shape for unknown assets and traversal attempts', async () => {
    const urls = [
      '/console/nope.js',
      '/console/app.ts',
      '/console/APP.JS',
      '/console/.env',
      '/console/..%2f..%2fpackage.json',
      '/console/..%2fsrc%2fconsole%2froutes.ts',
      '/console/%2e%2e%2fpackage.json',
      '/console/..%5c..%5cpackage.json',
      '/console/../package.json',
      '/console/app.js%00.css',
      '/console/views/app.js',
    ];
    for (const url of urls) {
      const res = await t.inject({ method: 'GET', url });
      // A NUL anywhere in a request is refused at the edge before routing (docs/security.md).
      const refused = url.includes('%00') ? [400, 'validation_failed'] : [404, 'not_found'];
      expect(res.statusCode, url).toBe(refused[0]);
      expect(res.headers['content-type'], url).toMatch(/^application\/json/);
      const body = res.json<{ error: { code: string; message: string } }>();
      expect(body.error.code, url).toBe(refused[1]);
      expect(res.body).not.toContain('"version"');
    }
  });

  it('keeps the console out of the OpenAPI document', async () => {
    const doc = (await t.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, unknown>;
    }>();
    expect(Object.keys(doc.paths).some((p) => p.startsWith('/console'))).toBe(false);
  });

  it('refuses a tenant key with 403 on every /v1/admin route', async () => {
    const doc = (await t.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, unknown>>;
    }>();
    const routes = Object.entries(doc.paths)
      .filter(([p]) => p.startsWith('/v1/admin/'))
      .flatMap(([p, methods]) => Object.keys(methods).map((m) => [m.toUpperCase(), p] as const));
    expect(routes.length).toBeGreaterThanOrEqual(10);
    for (const [method, route] of routes) {
      const url = route.replace(/\{[^}]+\}/g, 'acme');
      const res = await t.call(method, url, t.keys.tenant, method === 'GET' ? undefined : {});
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      expect(res.json<{ error: { code: string } }>().error.code).toBe('forbidden');
    }
  });
});
