import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Suites spawn real servers and subprocesses; two cores do not gain from more forks.
    maxWorkers: 2,
  },
});
