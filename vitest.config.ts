import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', ['json', { outputFile: '.vitest-results.json' }]],
    // Two cores: timing-sensitive lease tests stay honest with at most two files at once.
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
