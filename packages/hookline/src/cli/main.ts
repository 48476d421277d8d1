// The `hookline` command. Every subcommand reads the same configuration (HOOKLINE_* variables);
// failures print one line on stderr and exit non-zero.
import { Command } from 'commander';
import { ConfigError, loadConfig } from '../config.js';
import { HooklineError } from '../errors.js';
import { registerDeadLetterCommands } from './dead-letters.js';
import { registerKeyCommands } from './keys.js';
import { registerEventCommands } from './emit.js';
import { registerServerCommands } from './serve.js';
import { registerMigrateCommand } from './migrate.js';

export function fail(err: unknown): never {
  const message =
    err instanceof ConfigError || err instanceof HooklineError || err instanceof Error
      ? err.message
      : String(err);
  process.stderr.write(`hookline: ${message.split('\n')[0]}\n`);
  process.exit(1);
}

const program = new Command('hookline')
  .description('Webhook delivery: durable emit, fan-out, signed POSTs, retries, encrypted dead letters')
  .version('0.1.0')
  .showHelpAfterError()
  .configureOutput({ writeErr: (text) => process.stderr.write(text) });

let config;
try {
  config = loadConfig();
} catch (err) {
  fail(err);
}

registerServerCommands(program, config);
registerMigrateCommand(program, config);
registerKeyCommands(program, config);
registerEventCommands(program, config);
registerDeadLetterCommands(program, config);

program.parseAsync(process.argv).catch(fail);
