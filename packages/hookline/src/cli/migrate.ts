import type { Command } from 'commander';
import type { Config } from '../config.js';
import { createContext, createLogger } from '../context.js';
import { keyConverter } from '../engine/sealing.js';
import { migrate } from '../store/migrations/index.js';

export function registerMigrateCommand(program: Command, config: Config): void {
  program
    .command('migrate')
    .description('create or upgrade the database schema, then exit')
    .action(async () => {
      const ctx = await createContext(config, { logger: createLogger(config, 2), processMetrics: false });
      try {
        const result = await migrate(
          ctx.db,
          (message) => process.stderr.write(`${message}\n`),
          keyConverter(ctx.envelope),
        );
        process.stderr.write(
          result.applied.length > 0
            ? `schema at version ${result.current} (applied ${result.applied.join(', ')})\n`
            : `schema already at version ${result.current}\n`,
        );
      } finally {
        await ctx.signal.close();
        await ctx.db.close();
        await ctx.tracing.shutdown();
      }
    });
}
