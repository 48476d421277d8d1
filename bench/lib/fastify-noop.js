// The ingest reference: a Fastify server in its own process whose POST /v1/events parses the JSON
// body and answers 202 with an id, doing nothing else. hookline's ingest is compared with this,
// served to the same emitter, to see what durability and validation cost over plain HTTP.
import { randomBytes } from 'node:crypto';
import Fastify from 'fastify';
import { childOptions, forkRole, isMain, serveRequests } from './processes.js';

/** Orchestrator side: starts the no-op server on `port`; resolves once it listens. */
export async function startFastifyNoop({ port }) {
  const child = forkRole(import.meta.url, { port });
  await child.waitEvent((m) => m.event === 'ready');
  child.origin = `http://127.0.0.1:${port}`;
  return child;
}

async function main() {
  const { port } = childOptions();
  const app = Fastify({ logger: false, bodyLimit: 256 * 1024 });
  app.post('/v1/events', async (request, reply) => {
    if (typeof request.body?.tenant_id !== 'string') return reply.status(400).send({ error: 'bad' });
    return reply.status(202).send({ id: `msg_${randomBytes(8).toString('hex')}` });
  });
  serveRequests({});
  await app.listen({ port, host: '127.0.0.1' });
  process.send({ event: 'ready' });
}

if (isMain(import.meta.url)) main();
