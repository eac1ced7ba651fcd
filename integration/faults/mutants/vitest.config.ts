import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The mutation self-test's runs (see main.mjs): one file, one run at a time.
export default defineConfig({
  test: {
    name: 'faults-mutants',
    root: fileURLToPath(new URL('../../..', import.meta.url)),
    include: ['integration/faults/mutants/mutant.suite.ts'],
    fileParallelism: false,
    testTimeout: 10 * 60_000,
    hookTimeout: 60_000,
  },
});
