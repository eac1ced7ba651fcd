import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', ['json', { outputFile: '.vitest-results.json' }]],
    // Most integration time is spent waiting on etcd timers (TTLs, election timeouts, cron's
    // second-granular fires), not on CPU: with two files at once this 2-core host sat 60-70%
    // idle. Four at once keep it busier (35% idle or more for three quarters of a run) and halve
    // the wall time. A bound in a test that four files at once break is a bound taken from a
    // quiet machine: it is fixed in the test, from what it depends on, not hidden by running
    // fewer files. (The full fault suite, `pnpm faults`, runs one fault run at a time.)
    maxWorkers: 4,
    projects: [
      {
        test: {
          name: 'unit',
          // examples/unit-testing shows users' own unit tests (on memoryClient): run like ours.
          include: ['packages/*/src/**/*.test.ts', 'examples/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['integration/**/*.test.ts'],
          globalSetup: ['integration/setup/global-etcd.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
