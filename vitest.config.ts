import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', ['json', { outputFile: '.vitest-results.json' }]],
    // Most integration time is spent waiting on etcd timers (TTLs, election timeouts), not CPU:
    // with two files at once this 2-core host sat 60-70% idle. The tests' timing bounds come from
    // measured event-loop lag and etcd's own timeouts, so four files at once (the host then
    // sits 35% idle or more three quarters of the time) cost no honesty and halve the wall time.
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
