import type { Command } from 'commander';
import { CLI_ACTOR } from '../engine/audit.js';
import { inspectDeadLetter, listDeadLetterViews, replayDeadLetter } from '../admin/dead-letter-service.js';
import { getReplayJobView, startReplayJob, type ReplayJobView } from '../admin/replay-jobs.js';
import type { Config } from '../config.js';
import type { Context } from '../context.js';
import { HooklineError } from '../errors.js';
import { parseLimit, printJson, printPage, withContext } from './one-shot.js';

function parseDate(value: string | undefined, flag: string): number | null {
  if (value === undefined) return null;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new HooklineError('validation_failed', `${flag} is not a date (use ISO-8601)`);
  return ms;
}

const POLL_MS = 500;
/** With nothing done after this long, the job is probably waiting for a worker. */
const NO_WORKER_HINT_MS = 15_000;
const BAR_WIDTH = 30;

/** `[#########---------]  45%  450/1000 replayed, 3 skipped, 0 failed` */
export function progressLine(job: ReplayJobView): string {
  const handled = job.replayed + job.skipped + job.failed;
  const share = job.count === 0 ? 1 : Math.min(1, handled / job.count);
  const filled = Math.round(share * BAR_WIDTH);
  const bar = `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}]`;
  return `${bar} ${String(Math.floor(share * 100)).padStart(3)}%  ${handled}/${job.count}: ${job.replayed} replayed, ${job.skipped} skipped, ${job.failed} failed`;
}

/** Redrawn in place on a terminal; elsewhere (a log file) one line per tenth of the way. */
function progressBar(): (job: ReplayJobView) => void {
  let lastTenth = -1;
  return (job) => {
    const handled = job.replayed + job.skipped + job.failed;
    if (process.stderr.isTTY) {
      process.stderr.write(`\r${progressLine(job)}`);
      return;
    }
    const tenth = job.count === 0 ? 10 : Math.floor((handled / job.count) * 10);
    if (tenth !== lastTenth || job.status !== 'running') {
      lastTenth = tenth;
      process.stderr.write(`${progressLine(job)}\n`);
    }
  };
}

/** Polls a bulk-replay job until it ends (the workers run it: delivery/replay-runner.ts). */
async function watchReplayJob(
  ctx: Context,
  id: string,
  show: ((job: ReplayJobView) => void) | null,
): Promise<ReplayJobView> {
  const started = Date.now();
  let hinted = false;
  for (;;) {
    const job = await getReplayJobView(ctx, id);
    show?.(job);
    if (job.status !== 'running') return job;
    if (
      show &&
      !hinted &&
      Date.now() - started > NO_WORKER_HINT_MS &&
      job.replayed + job.skipped + job.failed === 0
    ) {
      hinted = true;
      process.stderr.write(
        `${process.stderr.isTTY ? '\n' : ''}no progress yet: the job runs in a delivery worker (hookline serve or hookline worker) on this database\n`,
      );
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
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
        const job = await withContext(config, async (ctx) => {
          const created = await startReplayJob(ctx, filter, CLI_ACTOR);
          if (!o.json) {
            process.stderr.write(
              `replay job ${created.id} over ${created.count} dead letters (Ctrl-C stops watching; the job goes on)\n`,
            );
          }
          return watchReplayJob(ctx, created.id, o.json ? null : progressBar());
        });
        if (process.stderr.isTTY && !o.json) process.stderr.write('\n');
        if (o.json) printJson(job);
        else process.stdout.write(`${job.status}: ${progressLine(job).replace(/^\[[#-]+\]\s+/, '')}\n`);
        if (job.status === 'failed') throw new Error(`replay job ${job.id} failed: ${job.error}`);
      },
    );
}
