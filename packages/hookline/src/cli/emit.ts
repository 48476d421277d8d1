import type { Command } from 'commander';
import type { Config } from '../config.js';
import { HooklineError } from '../errors.js';
import { Emitter } from '../events/emit.js';
import { withContext } from './one-shot.js';

export function registerEventCommands(program: Command, config: Config): void {
  program
    .command('emit <tenant> <type> <json-data>')
    .description('emit one event, e.g. hookline emit acme user.created \'{"userId":"user_1"}\'')
    .option(
      '--ordering-key <key>',
      'deliver in emit order with the other events of this key (e.g. the userId)',
    )
    .action(async (tenant: string, type: string, json: string, options: { orderingKey?: string }) => {
      let data: unknown;
      try {
        data = JSON.parse(json);
      } catch {
        throw new HooklineError('invalid_json', '<json-data> is not valid JSON');
      }
      const result = await withContext(config, (ctx) =>
        new Emitter(ctx).emit({ tenantId: tenant, type, data, orderingKey: options.orderingKey ?? null }),
      );
      process.stdout.write(`${result.id}\n`);
    });
}
