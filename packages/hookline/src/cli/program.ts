// The `hookline` command's program. Every subcommand reads the same configuration (HOOKLINE_* variables);
// failures print one line on stderr and exit non-zero.
import { Command } from 'commander';
import { ConfigError, loadConfig, unknownVariables, type Config } from '../config.js';
import { createLogger } from '../context.js';
import { HooklineError } from '../errors.js';
import { registerDeadLetterCommands } from './dead-letters.js';
import { registerKeyCommands } from './keys.js';
import { registerEventCommands } from './emit.js';
import { registerServerCommands } from './serve.js';
import { registerMigrateCommand } from './migrate.js';

/**
 * A misspelled variable would otherwise be ignored without a word, and its default used: one warning
 * line (on stderr, for every command) names each unknown `HOOKLINE_` variable and what it probably meant.
 */
function warnAboutUnknownVariables(config: Config): void {
  const unknown = unknownVariables(process.env);
  if (unknown.length === 0) return;
  const described = unknown.map((u) => (u.closest ? `${u.name} (did you mean ${u.closest}?)` : u.name));
  createLogger(config, 2).warn(
    {
      unknown_variables: unknown.map((u) => u.name),
      did_you_mean: Object.fromEntries(unknown.filter((u) => u.closest).map((u) => [u.name, u.closest])),
    },
    `ignoring unknown variables: ${described.join(', ')} (see docs/configuration.md)`,
  );
}

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
warnAboutUnknownVariables(config);

registerServerCommands(program, config);
registerMigrateCommand(program, config);
registerKeyCommands(program, config);
registerEventCommands(program, config);
registerDeadLetterCommands(program, config);

program.parseAsync(process.argv).catch(fail);
