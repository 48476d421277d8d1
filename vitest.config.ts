import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts'],
    // Tests await events, each with its own bound; these only end a test that hangs. A suite on a busy
    // 2-core machine (other processes beside it) takes several times as long as on an idle one.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Suites spawn real servers and subprocesses; two cores do not gain from more forks.
    maxWorkers: 2,
    // In CI a JSON report as well, from which .ci/run prints its one-line summary.
    reporters: process.env.CI === 'true' ? ['default', 'json'] : ['default'],
    outputFile: { json: 'test-artifacts/vitest-report.json' },
  },
});
