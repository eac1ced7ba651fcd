import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CheckResult } from './index.js';
import { renderTimeline } from './timeline.js';
import type { CheckConfig, HistoryLine, ResourceLogs } from './types.js';

export interface RunArtifacts {
  history: readonly HistoryLine[];
  logs: ResourceLogs;
  result: CheckResult;
  config: CheckConfig;
}

/** Writes report.json, timeline.html and summary.txt into `dir`; returns their paths. */
export async function writeRunArtifacts(
  dir: string,
  { history, logs, result, config }: RunArtifacts,
): Promise<{ report: string; timeline: string; summary: string }> {
  await mkdir(dir, { recursive: true });
  const paths = {
    report: join(dir, 'report.json'),
    timeline: join(dir, 'timeline.html'),
    summary: join(dir, 'summary.txt'),
  };
  const report = { ...result.report, config };
  await writeFile(paths.report, `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(paths.timeline, renderTimeline(history, logs, result));
  await writeFile(paths.summary, `${result.summary}\n`);
  return paths;
}
