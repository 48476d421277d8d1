import type { Command } from 'commander';
import type { Config } from '../config.js';
import { createApiKey, publicApiKey } from '../keys/api-keys.js';
import { ROLES, listApiKeys, revokeApiKey, type Role } from '../store/api-keys.js';
import { HooklineError } from '../errors.js';
import { printJson, printTable, withContext } from './one-shot.js';

export function registerKeyCommands(program: Command, config: Config): void {
  const keys = program.command('keys').description('API keys');
  keys
    .command('create')
    .description('create a key and print it (shown only this once) on stdout')
    .requiredOption('--role <role>', `one of ${ROLES.join(', ')}`)
    .option('--tenant <id>', 'the tenant of a tenant key')
    .option('--label <text>', 'a note to recognise the key by', '')
    .action(async (options: { role: string; tenant?: string; label: string }) => {
      if (!(ROLES as readonly string[]).includes(options.role)) {
        throw new HooklineError('validation_failed', `--role must be one of ${ROLES.join(', ')}`);
      }
      const created = await withContext(config, (ctx) =>
        createApiKey(ctx, {
          role: options.role as Role,
          tenantId: options.tenant ?? null,
          label: options.label,
        }),
      );
      process.stdout.write(`${created.key}\n`);
    });
  keys
    .command('list')
    .description('list keys (never their secret part)')
    .option('--json', 'machine-readable output')
    .action(async (options: { json?: boolean }) => {
      const rows = await withContext(config, (ctx) => listApiKeys(ctx.db, 1000, null));
      const views = rows.map(publicApiKey);
      if (options.json) printJson(views);
      else printTable(views, ['id', 'prefix', 'role', 'tenant_id', 'label', 'created_at', 'revoked_at']);
    });
  keys
    .command('revoke <id>')
    .description('revoke a key; requests with it fail at once')
    .action(async (id: string) => {
      const row = await withContext(config, (ctx) => revokeApiKey(ctx.db, id, ctx.clock()));
      if (!row) throw new HooklineError('not_found', `no API key ${id}`);
      process.stderr.write(`revoked ${id}\n`);
    });
}
