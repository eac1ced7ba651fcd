// Prints the totals from vitest's JSON report: skipped tests on one line, then, last,
// "N passed, N failed" (a suite that failed to load counts as failed).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const reportPath = fileURLToPath(new URL('../.vitest-results.json', import.meta.url));

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
  console.log(`${skipped} skipped`);
  console.log(`${report.numPassedTests} passed, ${report.numFailedTests + brokenFiles} failed`);
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) printTotals();
