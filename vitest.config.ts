import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Suites spawn real servers and subprocesses; two cores do not gain from more forks.
    maxWorkers: 2,
    // In CI a JSON report as well, from which .ci/run prints its one-line summary.
    reporters: process.env.CI === 'true' ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-artifacts/vitest-report.json' },
  },
});
