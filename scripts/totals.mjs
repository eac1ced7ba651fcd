// Prints the totals from vitest's JSON report: skipped tests on one line, then, last,
// "N passed, N failed" (a suite that failed to load counts as failed).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const reportPath = fileURLToPath(new URL('../.vitest-results.json', import.meta.url));
export const statusPath = fileURLToPath(new URL('../.vitest-status.json', import.meta.url));

function exitCodeOfRun() {
  try {
    return JSON.parse(readFileSync(statusPath, 'utf8')).exitCode;
  } catch {
    return 0; // vitest was run some other way: its report is all there is
  }
}

export function printTotals() {
  let report;
  try {
    report = JSON.parse(readFileSync(reportPath, 'utf8'));
  } catch {
    console.log('no vitest report at .vitest-results.json: counting the run as one failure');
    console.log('0 passed, 1 failed');
    return 1;
  }
  const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  // Suites that failed to load count as failures too: their tests never ran.
  const brokenFiles = (report.testResults ?? []).filter(
    (file) => file.status === 'failed' && (file.assertionResults ?? []).length === 0,
  ).length;
  // A run vitest failed outside any test (an unhandled error) still counts, once.
  const failed = report.numFailedTests + brokenFiles;
  const exitCode = exitCodeOfRun();
  const outside = exitCode !== 0 && failed === 0 ? 1 : 0;
  if (outside) {
    console.log(`vitest exited with code ${exitCode} outside any test: counted as one failure`);
  }
  console.log(`${skipped} skipped`);
  console.log(`${report.numPassedTests} passed, ${failed + outside} failed`);
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) printTotals();
