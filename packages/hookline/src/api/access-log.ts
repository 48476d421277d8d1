// One access-log line per API request. Fastify's default is two at `info`, one as a request arrives
// and one as it is answered; at ingest rates those two lines were a fifth of the API thread's CPU per
// emit (bench/HISTORY.md, "Session of run T"), and the second can carry everything the first did.
// So `request completed` names the request too (method, URL, host, client address), and `incoming
// request` is logged at `debug`, for finding requests that never complete (docs/configuration.md,
// HOOKLINE_LOG_LEVEL).
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

export class AccessLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (error) {
      reply.log.error(
        { req: request, res: reply, err: error, responseTime: reply.elapsedTime },
        'request errored',
      );
    } else {
      reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
    }
  }
}
