import type { Command } from 'commander';
import { CLI_ACTOR } from '../admin/audit.js';
import {
  inspectDeadLetter,
  listDeadLetterViews,
  replayDeadLetter,
  replayDeadLetters,
} from '../admin/dead-letter-service.js';
import type { Config } from '../config.js';
import { HooklineError } from '../errors.js';
import { parseLimit, printJson, printPage, withContext } from './one-shot.js';

function parseDate(value: string | undefined, flag: string): number | null {
  if (value === undefined) return null;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new HooklineError('validation_failed', `${flag} is not a date (use ISO-8601)`);
  return ms;
}

/** A progress line on stderr, redrawn in place on a terminal. */
function progress(label: string): (done: number) => void {
  return (done) => {
    if (process.stderr.isTTY) process.stderr.write(`\r${label}: ${done} processed`);
    else process.stderr.write(`${label}: ${done} processed\n`);
  };
}

export function registerDeadLetterCommands(program: Command, config: Config): void {
  const dl = program.command('dead-letters').description('inspect and replay exhausted deliveries');

  dl.command('list')
    .description('dead letters, newest first (metadata only)')
    .option('--tenant <id>', 'only this tenant')
    .option('--endpoint <id>', 'only this endpoint')
    .option('--limit <n>', 'how many (1-100)', '50')
    .option('--cursor <id>', 'continue after this id')
    .option('--json', 'machine-readable output: {data, next_cursor}')
    .action(
      async (o: { tenant?: string; endpoint?: string; limit: string; cursor?: string; json?: boolean }) => {
        const limit = parseLimit(o.limit);
        const page = await withContext(config, (ctx) =>
          listDeadLetterViews(
            ctx,
            { tenantId: o.tenant ?? null, endpointId: o.endpoint ?? null },
            limit,
            o.cursor ?? null,
          ),
        );
        printPage(
          page,
          [
            'id',
            'tenant_id',
            'endpoint_id',
            'event_type',
            'attempts',
            'died_at',
            'replay_status',
            'last_error',
          ],
          o.json,
        );
      },
    );

  dl.command('show <id>')
    .description('one dead letter with its decrypted original message')
    .option('--json', 'machine-readable output')
    .action(async (id: string, o: { json?: boolean }) => {
      const view = await withContext(config, (ctx) => inspectDeadLetter(ctx, id, CLI_ACTOR));
      if (o.json) return printJson(view);
      const { body, headers, ...meta } = view;
      for (const [k, v] of Object.entries(meta)) process.stdout.write(`${k.padEnd(14)} ${v ?? '-'}\n`);
      process.stdout.write('\nheaders (as first sent)\n');
      for (const [k, v] of Object.entries(headers)) process.stdout.write(`  ${k}: ${v}\n`);
      process.stdout.write(`\nbody\n  ${body}\n`);
    });

  dl.command('replay [id]')
    .description('replay one dead letter, or with --all every one matching the filters')
    .option('--all', 'bulk replay (with --tenant, --endpoint, --since, --until)')
    .option('--tenant <id>', 'bulk: only this tenant')
    .option('--endpoint <id>', 'bulk: only this endpoint')
    .option('--since <date>', 'bulk: died at or after (ISO-8601)')
    .option('--until <date>', 'bulk: died before (ISO-8601)')
    .option('--json', 'machine-readable output')
    .action(
      async (
        id: string | undefined,
        o: {
          all?: boolean;
          tenant?: string;
          endpoint?: string;
          since?: string;
          until?: string;
          json?: boolean;
        },
      ) => {
        if (id && o.all)
          throw new HooklineError('validation_failed', 'give a dead-letter id or --all, not both');
        if (!id && !o.all)
          throw new HooklineError('validation_failed', 'give a dead-letter id, or --all for bulk replay');
        if (id) {
          const result = await withContext(config, (ctx) => replayDeadLetter(ctx, id, CLI_ACTOR));
          if (o.json) return printJson(result);
          process.stdout.write(`queued replay of ${result.id} as delivery ${result.replay_delivery_id}\n`);
          return;
        }
        const filter = {
          tenantId: o.tenant ?? null,
          endpointId: o.endpoint ?? null,
          since: parseDate(o.since, '--since'),
          until: parseDate(o.until, '--until'),
        };
        const result = await withContext(config, (ctx) =>
          replayDeadLetters(ctx, filter, CLI_ACTOR, o.json ? undefined : progress('replaying')),
        );
        if (process.stderr.isTTY && !o.json) process.stderr.write('\n');
        if (o.json) return printJson(result);
        const skipped = Object.entries(result.skipped)
          .filter(([, n]) => n > 0)
          .map(([why, n]) => `${n} ${why.replace(/_/g, ' ')}`);
        process.stdout.write(
          `queued ${result.count} replays${skipped.length ? `; skipped ${skipped.join(', ')}` : ''}\n`,
        );
      },
    );
}
