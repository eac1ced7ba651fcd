import type { CheckContext } from './context.js';
import type { LatencySample, Measure } from './liveness.js';
import type { FaultWindow } from './model.js';
import { RULES, type Rule, type Violation } from './types.js';
import type { ZombieStats } from './zombies.js';

export interface OutcomeCounts {
  ok: number;
  /** The resource refused a stale token (expected, safe). */
  stale: number;
  /** The SDK refused because the hold was already lost. */
  lost: number;
  /** `info`, or no answer at all (the process died). */
  unknown: number;
  /** timeout, aborted, error:<code>. */
  failed: number;
}

export interface LatencyStats {
  count: number;
  p50Ms?: number;
  maxMs?: number;
  /** The largest bound among the samples (they differ by fault kind for recovery). */
  boundMs?: number;
  minBoundMs?: number;
}

export interface RunReport {
  seed: number | string;
  fencing: boolean;
  config: CheckContext['config'];
  window: { startAt: number; endAt: number; durationMs: number };
  operations: OutcomeCounts & {
    total: number;
    byOp: Record<string, OutcomeCounts>;
    holdsLost: number;
  };
  faults: {
    total: number;
    byKind: Record<string, number>;
    /** Asked for in the config but never started. */
    notInjected: string[];
    windows: FaultWindow[];
  };
  violations: { total: number; byRule: Record<Rule, number>; list: Violation[] };
  zombies: ZombieStats;
  latency: Record<Measure, LatencyStats> & { samples: LatencySample[] };
}

export function buildReport(
  context: CheckContext,
  violations: Violation[],
  samples: LatencySample[],
  zombies: ZombieStats,
): RunReport {
  const { model, config } = context;
  const empty = (): OutcomeCounts => ({ ok: 0, stale: 0, lost: 0, unknown: 0, failed: 0 });
  const totals = empty();
  const byOp: Record<string, OutcomeCounts> = {};
  for (const op of model.operations) {
    const key = classify(op.type, op.reason);
    totals[key]++;
    (byOp[op.op] ??= empty())[key]++;
  }
  const byKind: Record<string, number> = {};
  for (const fault of model.faults) byKind[fault.fault] = (byKind[fault.fault] ?? 0) + 1;
  const byRule = Object.fromEntries(RULES.map((rule) => [rule, 0])) as Record<Rule, number>;
  for (const violation of violations) byRule[violation.rule]++;
  return {
    seed: config.seed,
    fencing: config.fencing,
    config,
    window: { startAt: model.startAt, endAt: model.endAt, durationMs: model.endAt - model.startAt },
    operations: {
      total: model.operations.length,
      ...totals,
      byOp,
      holdsLost: model.holds.filter((h) => h.endReason === 'lost').length,
    },
    faults: {
      total: model.faults.length,
      byKind,
      notInjected: config.faults.filter((kind) => !(kind in byKind)),
      windows: model.faults,
    },
    violations: { total: violations.length, byRule, list: violations },
    zombies,
    latency: {
      takeover: stats(samples, 'takeover'),
      recovery: stats(samples, 'recovery'),
      'lock-free': stats(samples, 'lock-free'),
      samples,
    },
  };
}

function classify(type: string | undefined, reason: string | undefined): keyof OutcomeCounts {
  if (type === 'ok') return 'ok';
  if (type === 'fail') return reason === 'stale' ? 'stale' : reason === 'lost' ? 'lost' : 'failed';
  return 'unknown';
}

function stats(samples: LatencySample[], measure: Measure): LatencyStats {
  const mine = samples.filter((s) => s.measure === measure);
  const measured = mine
    .filter((s) => s.latencyMs !== undefined && (s.status === 'ok' || s.status === 'late'))
    .map((s) => s.latencyMs ?? 0)
    .sort((a, b) => a - b);
  const out: LatencyStats = { count: measured.length };
  if (measured.length > 0) {
    out.p50Ms = measured[Math.ceil(measured.length / 2) - 1];
    out.maxMs = measured[measured.length - 1];
  }
  if (mine.length > 0) {
    out.boundMs = Math.max(...mine.map((s) => s.boundMs));
    out.minBoundMs = Math.min(...mine.map((s) => s.boundMs));
  }
  return out;
}

/** The one-line summary printed after every run. */
export function formatSummary(report: RunReport): string {
  const o = report.operations;
  const ops = `ops ${o.ok} ok / ${o.stale} stale / ${o.lost} lost / ${o.unknown} unknown / ${o.failed} failed`;
  const kinds = Object.entries(report.faults.byKind)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([kind, n]) => `${kind}×${n}`);
  const faults = `faults ${kinds.length ? kinds.join(' ') : 'none'}`;
  const rules = RULES.map((rule) => `${rule} ${report.violations.byRule[rule]}`).join(' ');
  const z = report.zombies;
  const zombies = `zombie writes ${z.attempted} attempted, ${z.rejected} rejected, ${z.prevented} prevented, ${z.accepted} accepted, ${z.landedFirst} landed before a newer write`;
  const parts = [
    ops,
    faults,
    `violations ${report.violations.total} (${rules})`,
    zombies,
    latency('takeover', report.latency.takeover),
    latency('recovery', report.latency.recovery),
  ];
  if (report.latency['lock-free'].boundMs !== undefined) {
    parts.push(latency('lock free', report.latency['lock-free']));
  }
  const head = `faults seed=${report.seed}${report.fencing ? '' : ' fencing=off'}`;
  return `${head}: ${parts.join('; ')}`;
}

function latency(label: string, s: LatencyStats): string {
  if (s.boundMs === undefined) return `${label} none`;
  const bound =
    s.minBoundMs !== undefined && s.minBoundMs !== s.boundMs
      ? `bounds ${sec(s.minBoundMs)}–${sec(s.boundMs)}`
      : `bound ${sec(s.boundMs)}`;
  if (s.p50Ms === undefined || s.maxMs === undefined) return `${label} unmeasured (${bound})`;
  return `${label} p50 ${sec(s.p50Ms)} max ${sec(s.maxMs)} (${bound})`;
}

function sec(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
