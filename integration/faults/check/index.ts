import { createContext } from './context.js';
import { checkLiveness, type LatencySample } from './liveness.js';
import { buildReport, formatSummary, type RunReport } from './report.js';
import { checkMonotonic } from './s1-monotonic.js';
import { checkSingleWriter } from './s2-single-writer.js';
import { checkDurability } from './s3-durability.js';
import { checkElectionWrites } from './s4-election.js';
import { checkCronFires } from './cron-fires.js';
import { checkFenceLiveness } from './fence-liveness.js';
import { checkSignals } from './s5-signal.js';
import { checkExclusion } from './s6-exclusion.js';
import { checkCronOnce } from './s7-cron-once.js';
import { checkCauses } from './s8-cause.js';
import type { CheckConfig, HistoryLine, ResourceLogs, Violation } from './types.js';
import { findZombies } from './zombies.js';

export type {
  CheckConfig,
  FaultKind,
  HistoryLine,
  LogEntry,
  ResourceLogs,
  Rule,
  Violation,
} from './types.js';
export type { LatencySample, Measure } from './liveness.js';
export type { RunReport, LatencyStats, OutcomeCounts } from './report.js';
export type { ZombieStats, ZombieWrite } from './zombies.js';
export { readHistory, parseHistory } from './history-file.js';
export { pageSize, renderTimeline } from './timeline.js';
export { screenshot } from './screenshot.js';
export { writeRunArtifacts } from './artifacts.js';

export interface CheckInput {
  history: readonly HistoryLine[];
  logs: ResourceLogs;
  config: CheckConfig;
}

export interface CheckResult {
  violations: Violation[];
  /** One line: operations, faults, violations per rule, zombie writes, latencies, seed. */
  summary: string;
  report: RunReport & { summary: string };
  samples: LatencySample[];
}

/**
 * Checks a run's history and resource logs against S1–S8, the liveness bounds (recovery, the
 * fence's, cron's) and coverage (every fault kind the run listed got in).
 */
export function checkRun({ history, logs, config }: CheckInput): CheckResult {
  const context = createContext(history, logs, config);
  const liveness = checkLiveness(context);
  const violations = [
    ...checkMonotonic(context),
    ...checkSingleWriter(context),
    ...checkDurability(context),
    ...checkElectionWrites(context),
    ...checkSignals(context),
    ...checkExclusion(context),
    ...checkCronOnce(context),
    ...checkCauses(context),
    ...liveness.violations,
    ...checkFenceLiveness(context),
    ...checkCronFires(context),
    ...checkCoverage(context),
  ].sort((a, b) => (a.at ?? Infinity) - (b.at ?? Infinity));
  const base = buildReport(context, violations, liveness.samples, findZombies(context));
  const summary = formatSummary(base);
  return { violations, summary, report: { ...base, summary }, samples: liveness.samples };
}

/** Coverage: every fault kind the run was asked for got in at least once. */
function checkCoverage(context: ReturnType<typeof createContext>): Violation[] {
  const injected = new Set(context.model.faults.map((f) => f.fault));
  return context.config.faults
    .filter((kind) => !injected.has(kind))
    .map((kind) => ({
      rule: 'coverage' as const,
      message: `the run listed fault kind ${kind} but never injected it (no target came in time)`,
    }));
}
