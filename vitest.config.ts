import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', ['json', { outputFile: '.vitest-results.json' }]],
    // Most integration time is spent waiting on etcd timers (TTLs, election timeouts, cron's
    // second-granular fires), not on CPU: with two files at once this 2-core host sits 60-70%
    // idle. Three at once ran a fresh clone's CI in 470 s against 885 s for two, as fast as
    // four (483-512 s) with less load on two cores; the failures four at once showed (a fault
    // checker's slack, a slow watch stream read as a broken one, a member cut that leaked) are
    // fixed at their cause.
    maxWorkers: 3,
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
