// `pnpm faults`: the full fault suite (full.suite.ts) under vitest; `pnpm faults --mutants`: the
// mutation self-test (mutants/main.mjs) instead. Other arguments go to whichever runs.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
if (args.includes('--mutants')) {
  process.argv = [process.argv[0], process.argv[1], ...args.filter((a) => a !== '--mutants')];
  await import('./mutants/main.mjs');
} else {
  const config = fileURLToPath(new URL('./vitest.config.ts', import.meta.url));
  const res = spawnSync('vitest', ['run', '--config', config, ...args], { stdio: 'inherit' });
  process.exit(res.status ?? 1);
}
