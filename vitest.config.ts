import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', ['json', { outputFile: '.vitest-results.json' }]],
    // Most integration time is spent waiting on etcd timers (TTLs, election timeouts, cron's
    // second-granular fires), not on CPU: with two files at once this 2-core host sits 60-70%
    // idle. Four at once halved the wall time, but a fresh-clone run then failed one or two of
    // its 2,310 tests in three runs out of four (a fault checker's 40 ms slack, a slow watch
    // stream read as a broken one), each a bound taken from a quiet machine; until every such
    // bound is derived from what it depends on, two files at once.
    maxWorkers: 2,
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
