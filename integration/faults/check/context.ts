import {
  buildModel,
  freeAfter,
  rttAt,
  type FaultWindow,
  type Hold,
  type Model,
  type Write,
} from './model.js';
import type { CheckConfig, HistoryLine, LogEntry, ResourceLogs, Rule, Violation } from './types.js';

/** The lag tickers' period when the config does not say (the workers' own). */
export const DEFAULT_LAG_RESOLUTION_MS = 20;
export const DEFAULT_ATTEMPT_TIMEOUT_MS = 1_000;

/** Faults that freeze their target: none of its timers run until they end. */
export const FREEZES = new Set(['pause-holder', 'stall-loop']);
/** Faults that delete a hold's key on the server (the target and its token are on the line). */
export const DELETIONS = new Set(['revoke-lease', 'delete-key']);

/** What every rule reads: the folded history, the resources' logs and the run's config. */
export interface CheckContext {
  model: Model;
  logs: ResourceLogs;
  config: CheckConfig;
  /**
   * The slack every lag-based bound adds: two ticks of the lag ticker. A block shorter than a
   * tick is not measured, and a timer that expired in a block runs after those that expired
   * before it, up to about one more tick after the block ends.
   */
  resolutionMs: number;
  attemptTimeoutMs: number;
  /** Write invokes by writeId. */
  writesById: Map<string, Write>;
  /** The first moment at or after `t` that `process` could run a timer (see {@link freeAfter}). */
  freeAfter(process: string, t: number): number;
}

export function createContext(
  history: readonly HistoryLine[],
  logs: ResourceLogs,
  config: CheckConfig,
): CheckContext {
  const model = buildModel(history);
  const writesById = new Map<string, Write>();
  for (const write of model.writes) if (write.writeId) writesById.set(write.writeId, write);
  const resolutionMs = 2 * (config.lagResolutionMs ?? DEFAULT_LAG_RESOLUTION_MS);
  return {
    model,
    logs,
    config,
    resolutionMs,
    attemptTimeoutMs: config.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS,
    writesById,
    freeAfter: (process, t) => freeAfter(model, process, t, resolutionMs),
  };
}

/** Fault windows aimed at `process` that overlap [from, to]. */
export function faultsOn(
  context: CheckContext,
  process: string,
  from: number,
  to: number,
): FaultWindow[] {
  return context.model.faults.filter(
    (f) => f.target === process && f.start <= to && (f.end ?? context.model.endAt) >= from,
  );
}

/**
 * The stretches of a hold its process spent frozen and not yet re-read: from each freeze's start
 * to the first read of the hold after the freeze ended (or the hold's end). Belief there is
 * excused: the process could not run, and the SDK promises only that its first read after a
 * pause sees the loss.
 */
export function frozenStretches(context: CheckContext, hold: Hold): [number, number][] {
  const stretches: [number, number][] = [];
  for (const f of faultsOn(context, hold.process, hold.start, hold.end)) {
    if (!FREEZES.has(f.fault)) continue;
    const woke = f.end ?? context.model.endAt;
    const read = hold.checks.find((c) => c.readAt >= woke)?.readAt ?? hold.end;
    stretches.push([f.start, Math.min(read, hold.end)]);
  }
  return stretches;
}

/** The length of [from, to] not covered by `stretches`. */
export function uncovered(from: number, to: number, stretches: [number, number][]): number {
  let left = Math.max(0, to - from);
  const sorted = [...stretches].sort((a, b) => a[0] - b[0]);
  let cursor = from;
  for (const [a, b] of sorted) {
    const lo = Math.max(a, cursor);
    const hi = Math.min(b, to);
    if (hi > lo) {
      left -= hi - lo;
      cursor = hi;
    }
  }
  return left;
}

/**
 * When `process` can first act on news due at the runner by `t` (callers pass an acknowledgement
 * + the holder's round trip): the runner (whose proxies carry every worker's connection) must be
 * free to pass it on, then the process to run. Each of the two may be late by up to a resolution
 * that no lag line shows (a stall just under two ticks leaves a ticker less than a period late),
 * so the runner's is added here; the caller adds the holder's.
 */
export function newsReaches(context: CheckContext, process: string, t: number): number {
  return context.freeAfter(process, context.freeAfter('runner', t) + context.resolutionMs);
}

/**
 * A deletion fault (revoke-lease, delete-key) aimed at this hold: when etcd acknowledged it (the
 * deletion happened before) and one round trip of the holder's own to etcd as it measured it
 * then (its watch gets the news within about that after the deletion).
 */
export function deletionOf(
  context: CheckContext,
  hold: Hold,
): { fault: FaultWindow; ackAt: number; rttMs: number } | undefined {
  for (const fault of context.model.faults) {
    if (!DELETIONS.has(fault.fault) || fault.target !== hold.process) continue;
    if (fault.detail.token !== hold.token) continue;
    const { ackAt } = fault.detail;
    if (typeof ackAt !== 'number') continue;
    return { fault, ackAt, rttMs: rttAt(context.model, hold.process, ackAt) };
  }
  return undefined;
}

/** The workload that made a logged write: its own field, else its invoke line's. */
export function workloadOf(context: CheckContext, entry: LogEntry): string {
  return entry.workload ?? context.writesById.get(entry.writeId)?.workload ?? 'lock';
}

/** When a logged write happened, as best the history knows (for violation times). */
export function timeOf(context: CheckContext, entry: LogEntry): number | undefined {
  const write = context.writesById.get(entry.writeId);
  return write?.doneAt ?? write?.invokeAt;
}

/** A violation about a logged write: its process, token and resource, and when it happened. */
export function logViolation(
  context: CheckContext,
  rule: Rule,
  entry: LogEntry,
  resource: string,
  message: string,
): Violation {
  const violation: Violation = {
    rule,
    message,
    process: entry.process,
    token: entry.token,
    resource,
  };
  const at = timeOf(context, entry);
  if (at !== undefined) violation.at = at;
  return violation;
}

/** Each resource's log in commit order (seq ascending), split by name. */
export function logsByName(
  logs: ResourceLogs,
  include: (entry: LogEntry) => boolean,
): { resource: string; name: string; entries: LogEntry[] }[] {
  const out: { resource: string; name: string; entries: LogEntry[] }[] = [];
  for (const resource of Object.keys(logs).sort()) {
    const byName = new Map<string, LogEntry[]>();
    const sorted = [...(logs[resource] ?? [])].sort((a, b) => a.seq - b.seq);
    for (const entry of sorted) {
      if (!include(entry)) continue;
      let list = byName.get(entry.name);
      if (!list) byName.set(entry.name, (list = []));
      list.push(entry);
    }
    for (const [name, entries] of byName) out.push({ resource, name, entries });
  }
  return out;
}
