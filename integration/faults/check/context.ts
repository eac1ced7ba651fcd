import { buildModel, type Model, type Write } from './model.js';
import type { CheckConfig, HistoryLine, LogEntry, ResourceLogs, Rule, Violation } from './types.js';

export const DEFAULT_TOLERANCE_MS = 250;

/** What every rule reads: the folded history, the resources' logs and the run's config. */
export interface CheckContext {
  model: Model;
  logs: ResourceLogs;
  config: CheckConfig;
  toleranceMs: number;
  /** Write invokes by writeId. */
  writesById: Map<string, Write>;
}

export function createContext(
  history: readonly HistoryLine[],
  logs: ResourceLogs,
  config: CheckConfig,
): CheckContext {
  const model = buildModel(history);
  const writesById = new Map<string, Write>();
  for (const write of model.writes) if (write.writeId) writesById.set(write.writeId, write);
  return {
    model,
    logs,
    config,
    toleranceMs: config.toleranceMs ?? DEFAULT_TOLERANCE_MS,
    writesById,
  };
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
