// The HTTP surface of `hookline worker`: /healthz, /readyz and /metrics on HOOKLINE_WORKER_ADMIN_PORT.
// Plain node:http, so a worker process never loads the API's framework, schemas and routes: it starts
// in about half the time, which is how soon a fleet recovers after a restart or a scale-up.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Context } from '../context.js';
import { onClientError } from './client-error.js';

export interface HealthServer {
  address: string;
  close(): Promise<void>;
}

function send(
  res: ServerResponse,
  status: number,
  body: string,
  type = 'application/json; charset=utf-8',
): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** The one error shape of every answer (docs/contract.md §4). */
function error(res: ServerResponse, status: number, code: string, message: string): void {
  send(res, status, JSON.stringify({ error: { code, message } }));
}

async function route(ctx: Context, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?')[0];
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    return error(res, 405, 'method_not_allowed', `${req.method} is not allowed here; use GET`);
  }
  if (path === '/healthz') return send(res, 200, JSON.stringify({ status: 'ok' }));
  if (path === '/readyz') {
    try {
      await ctx.db.ping();
      return send(res, 200, JSON.stringify({ status: 'ready' }));
    } catch (err) {
      ctx.logger.warn({ err }, 'readiness check failed');
      return error(res, 503, 'not_ready', 'the database is not reachable');
    }
  }
  if (path === '/metrics') return send(res, 200, await ctx.metrics.text(), ctx.metrics.contentType);
  return error(
    res,
    404,
    'not_found',
    `no route ${req.method} ${path} on a worker (health, readiness, metrics only)`,
  );
}

export async function startHealthServer(ctx: Context, port: number, host: string): Promise<HealthServer> {
  const server = createServer((req, res) => {
    route(ctx, req, res).catch((err: unknown) => {
      ctx.logger.error({ err }, 'health route failed');
      if (!res.headersSent)
        error(res, 500, 'internal_error', 'internal error; the server log has the details');
      else res.destroy();
    });
  });
  server.on('clientError', onClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    address: `http://${host.includes(':') ? `[${host}]` : host}:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
