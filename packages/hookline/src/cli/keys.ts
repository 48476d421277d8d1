import type { Command } from 'commander';
import { CLI_ACTOR } from '../engine/audit.js';
import type { Config } from '../config.js';
import { createApiKey, listApiKeyViews, revokeKey } from '../keys/api-keys.js';
import { ROLES, type Role } from '../store/api-keys.js';
import { HooklineError } from '../errors.js';
import { isoTime } from '../pagination.js';
import { parseLimit, printPage, withContext } from './one-shot.js';

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
        createApiKey(
          ctx,
          { role: options.role as Role, tenantId: options.tenant ?? null, label: options.label },
          CLI_ACTOR,
        ),
      );
      process.stdout.write(`${created.key}\n`);
    });
  keys
    .command('list')
    .description('list keys, newest first (never their secret part)')
    .option('--limit <n>', 'how many (1-100)', '50')
    .option('--cursor <id>', 'continue after this id')
    .option('--json', 'machine-readable output: {data, next_cursor}')
    .action(async (options: { limit: string; cursor?: string; json?: boolean }) => {
      const limit = parseLimit(options.limit);
      const page = await withContext(config, (ctx) => listApiKeyViews(ctx, limit, options.cursor ?? null));
      printPage(
        page,
        ['id', 'prefix', 'role', 'tenant_id', 'label', 'created_at', 'revoked_at'],
        options.json,
      );
    });
  keys
    .command('revoke <id>')
    .description('revoke a key; requests with it fail at once')
    .action(async (id: string) => {
      const revoked = await withContext(config, (ctx) => revokeKey(ctx, id, CLI_ACTOR));
      if (!revoked) throw new HooklineError('not_found', `no API key ${id}`);
      // Asking again is not an error (exit 0), and changes and records nothing.
      process.stderr.write(
        revoked.alreadyRevoked
          ? `already revoked ${id} (at ${isoTime(revoked.row.revoked_at)}); nothing changed\n`
          : `revoked ${id}\n`,
      );
    });
}
