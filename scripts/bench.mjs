// pnpm bench: every benchmark, each reporting ratios against a baseline measured in the same run.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

let failed = false;
for (const script of [
  'bench-core.mjs',
  'bench-election.mjs',
  'bench-fence.mjs',
  'bench-cron.mjs',
]) {
  console.log(`\n# ${script}`);
  const path = fileURLToPath(new URL(script, import.meta.url));
  const { status } = spawnSync(process.execPath, [path, ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  failed ||= status !== 0;
}
process.exit(failed ? 1 : 0);
