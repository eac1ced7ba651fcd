// Runs vitest with the given arguments and ends with one plain totals line,
// so a run that executed no test is visible to people and to CI alike.
import { spawnSync } from 'node:child_process';
import { printTotals } from './totals.mjs';

const result = spawnSync('vitest', ['run', ...process.argv.slice(2)], {
  stdio: 'inherit',
  shell: false,
  env: process.env,
});
const reportMissing = printTotals();
process.exit(result.status === 0 ? reportMissing : (result.status ?? 1));
