import type { Command } from 'commander';
import type { Config } from '../config.js';
import { HooklineError } from '../errors.js';
import { Emitter } from '../events/emit.js';
import { withContext } from './one-shot.js';

export function registerEventCommands(program: Command, config: Config): void {
  program
    .command('emit <tenant> <type> <json-data>')
    .description('emit one event, e.g. hookline emit acme user.created \'{"userId":"user_1"}\'')
    .action(async (tenant: string, type: string, json: string) => {
      let data: unknown;
      try {
        data = JSON.parse(json);
      } catch {
        throw new HooklineError('invalid_json', '<json-data> is not valid JSON');
      }
      const result = await withContext(config, (ctx) =>
        new Emitter(ctx).emit({ tenantId: tenant, type, data }),
      );
      process.stdout.write(`${result.id}\n`);
    });
}
