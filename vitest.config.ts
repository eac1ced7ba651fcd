import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that wait out TTLs, record retention or a fault schedule for a minute or more (the
 * slowest first, as measured on a fresh clone's CI). A fresh clone has no durations cache, so
 * vitest orders by file size and the 2-minute fault smoke started last, 85 s after every other
 * file had ended; started first, no long file begins when the rest are nearly done.
 */
const LONG_FILES = [
  'integration/faults/combined.test.ts',
  'integration/cron/replicas.test.ts',
  'integration/cron/skew.test.ts',
  'integration/cron/skew-retry.test.ts',
  'integration/core/cluster-failover.test.ts',
  'integration/faults/network.test.ts',
  'integration/cron/replicas-policies.test.ts',
];

class LongFilesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    // A renamed file would silently lose its place.
    const missing = LONG_FILES.filter((name) => !existsSync(resolve(this.ctx.config.root, name)));
    if (missing.length > 0)
      throw new Error(`vitest.config.ts LONG_FILES: no such file: ${missing.join(', ')}`);
    const rank = (f: TestSpecification) => {
      const i = LONG_FILES.findIndex((name) => f.moduleId.endsWith(name));
      return i < 0 ? LONG_FILES.length : i;
    };
    const sorted = await super.sort(files);
    return sorted
      .map((file, i) => ({ file, i, rank: rank(file) }))
      .sort((a, b) => a.rank - b.rank || a.i - b.i)
      .map((x) => x.file);
  }
}

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
    sequence: { sequencer: LongFilesFirst },
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
