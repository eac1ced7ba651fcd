// Runs vitest with the given arguments and ends with the plain totals line, so a run that
// executed no test is visible to people and to CI alike. vitest's exit code is kept beside its
// JSON report: a run it fails outside any test (an unhandled error) must not total "0 failed".
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { printTotals, reportPath, statusPath } from './totals.mjs';

rmSync(reportPath, { force: true });
rmSync(statusPath, { force: true });
const result = spawnSync('vitest', ['run', ...process.argv.slice(2)], {
  stdio: 'inherit',
  shell: false,
  env: process.env,
});
const exitCode = result.status ?? 1;
writeFileSync(statusPath, JSON.stringify({ exitCode }));
const reportMissing = printTotals();
process.exit(exitCode === 0 ? reportMissing : exitCode);
