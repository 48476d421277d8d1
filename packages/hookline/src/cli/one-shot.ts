// Runs a short command against the configured database: migrate (idempotent, so a fresh install
// works in any order), run, close. Logs go to stderr so stdout carries only the command's answer.
import type { Config } from '../config.js';
import { createContext, createLogger, type Context } from '../context.js';
import { HooklineError } from '../errors.js';
import type { Page } from '../pagination.js';
import { keyConverter } from '../engine/sealing.js';
import { migrate } from '../store/migrations/index.js';

export async function withContext<T>(config: Config, run: (ctx: Context) => Promise<T>): Promise<T> {
  const ctx = await createContext(config, { logger: createLogger(config, 2), processMetrics: false });
  try {
    await migrate(ctx.db, undefined, keyConverter(ctx.envelope));
    return await run(ctx);
  } finally {
    await ctx.signal.close();
    await ctx.db.close();
    // `hookline emit`'s span, say (docs/operators.md, "Tracing").
    await ctx.tracing.shutdown();
  }
}

/** `--limit` of a list command: a whole number from 1 to 100, like the API's `?limit=`. */
export function parseLimit(raw: string): number {
  const limit = Number(raw);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
    throw new HooklineError('validation_failed', '--limit must be a whole number from 1 to 100');
  }
  return limit;
}

/**
 * Prints one page of a list: with --json the API's page shape `{data, next_cursor}` (every list
 * command answers this one shape), else a table, and where the next page starts on stderr.
 */
export function printPage<T extends Record<string, unknown>>(
  page: Page<T>,
  columns: string[],
  json: boolean | undefined,
): void {
  if (json) return printJson(page);
  printTable(page.data, columns);
  if (page.next_cursor) process.stderr.write(`more: --cursor ${page.next_cursor}\n`);
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/** A plain aligned table for people; scripts use --json. */
export function printTable(rows: Record<string, unknown>[], columns: string[]): void {
  if (rows.length === 0) {
    process.stdout.write('(none)\n');
    return;
  }
  const cells = rows.map((r) =>
    columns.map((c) => (r[c] === null || r[c] === undefined ? '-' : String(r[c]))),
  );
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => (row[i] ?? '').length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  process.stdout.write([line(columns), ...cells.map(line)].join('\n') + '\n');
}
