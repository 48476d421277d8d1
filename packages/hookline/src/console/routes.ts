// The operator console (docs/contract.md §4.3): a static page and its few assets, served without a key. The
// page itself asks for an instance-manager key and talks to /v1/admin/* like any other client, so
// nothing here touches data or needs auth.
import { readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { errorBody } from '../errors.js';

// `../../console` is the package's console folder from both src/console and dist/console.
const CONSOLE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../console');

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

// Flat names only: no slashes, no dots besides the one before the extension, so a name can never
// climb out of the folder whatever the URL decoding did to it.
const ASSET_NAME = /^[a-z0-9][a-z0-9-]*\.(html|js|css|svg)$/;

/**
 * Scripts, styles, images and fetches from this origin only; no inline script or style elements, no
 * framing, no plugins. The page's own code sets element styles through the CSSOM, which CSP allows.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The asset names present at startup; a request for anything else is a 404 before any disk access. */
function listAssets(): Set<string> {
  try {
    return new Set(readdirSync(CONSOLE_DIR).filter((name) => ASSET_NAME.test(name)));
  } catch {
    return new Set();
  }
}

async function sendAsset(reply: FastifyReply, name: string) {
  const body = await readFile(path.join(CONSOLE_DIR, name));
  return (
    reply
      .header('content-type', CONTENT_TYPES[path.extname(name)] ?? 'application/octet-stream')
      .header('content-security-policy', CONSOLE_CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY')
      // Small files that change with every release: always revalidate rather than serve a stale page.
      .header('cache-control', 'no-cache')
      .send(body)
  );
}

export function consoleRoutes(): FastifyPluginAsync {
  return async (app) => {
    const assets = listAssets();
    const schema = { hide: true };

    const page = async (_request: unknown, reply: FastifyReply) => {
      if (!assets.has('index.html')) {
        return reply.status(404).send(errorBody('not_found', 'the console is not installed'));
      }
      return sendAsset(reply, 'index.html');
    };
    // The service's root points a person who opened it in a browser at the console (docs/contract.md
    // §4.3); like the page itself it needs no key. A 302, not a 301: a browser must not remember it.
    app.get('/', { schema }, async (_request, reply) => reply.redirect('/console', 302));
    app.get('/console', { schema }, page);
    app.get('/console/', { schema }, page);

    app.get<{ Params: { asset: string } }>('/console/:asset', { schema }, async (request, reply) => {
      const name = request.params.asset;
      if (!ASSET_NAME.test(name) || !assets.has(name)) {
        return reply.status(404).send(errorBody('not_found', 'no such console asset'));
      }
      return sendAsset(reply, name);
    });
  };
}
