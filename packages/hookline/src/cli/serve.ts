import type { Command } from 'commander';
import type { Config } from '../config.js';
import { sendsFromThread } from '../delivery/sender-thread.js';
import { startService, type Service } from '../service.js';

function closeOnSignals(service: Service): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      service.ctx.logger.warn(`${signal} again: exiting without waiting`);
      process.exit(1);
    }
    stopping = true;
    service.ctx.logger.info(`${signal} received: finishing attempts in flight, then exiting`);
    service.close().then(
      () => process.exit(0),
      (err: unknown) => {
        service.ctx.logger.error({ err }, 'unclean shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

export function registerServerCommands(program: Command, config: Config): void {
  program
    .command('serve')
    .description('run the API, the console and (unless --no-worker) the delivery workers')
    .option('--no-worker', 'API only: leave delivery to `hookline worker` processes')
    .action(async (options: { worker: boolean }) => {
      const service = await startService(config, {
        api: true,
        worker: options.worker,
        deliveryThread: true,
        listen: true,
      });
      closeOnSignals(service);
      service.ctx.logger.info(
        { address: service.address, worker: options.worker, database: config.databaseUrl.split(':')[0] },
        `hookline listening on ${service.address}`,
      );
    });

  program
    .command('worker')
    .description('run delivery workers only (health and metrics on HOOKLINE_WORKER_ADMIN_PORT)')
    .action(async () => {
      // A worker process on SQLite sends from a thread of its own; on PostgreSQL it does not, nor does
      // `serve`, whose delivery thread would then take more of the cores its API answers from
      // (docs/architecture.md, "Sending").
      const service = await startService(config, {
        api: false,
        worker: true,
        workerOptions: { senderThread: sendsFromThread(config.databaseUrl) },
        listen: true,
      });
      closeOnSignals(service);
      service.ctx.logger.info(
        { address: service.address },
        `hookline worker running; health on ${service.address}`,
      );
    });
}
