import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// `pnpm faults`: the full fault suite, one run at a time (each run starts its own etcd cluster
// and worker processes; two at once on a small machine would make the timing bounds lie).
export default defineConfig({
  test: {
    name: 'faults',
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['integration/faults/full.suite.ts'],
    fileParallelism: false,
    testTimeout: 10 * 60_000,
    hookTimeout: 60_000,
  },
});
