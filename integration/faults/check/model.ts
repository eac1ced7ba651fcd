import type { HistoryLine } from './types.js';

/** A lock hold (`acquire` ok) or an election term (`campaign` ok), as its process believed it. */
export interface Hold {
  kind: 'lock' | 'term';
  workload: string;
  process: string;
  name: string;
  token: string;
  start: number;
  /** When the belief ended: the loss signal, the release/resign invoke, or the process's last line. */
  end: number;
  endReason: 'lost' | 'release' | 'end-of-history';
  lostAt?: number;
  /** Local deadlines in the order the process reported them. */
  deadlines: { at: number; deadlineAt: number }[];
  paused: boolean;
}

export type WriteOutcome = 'ok' | 'stale' | 'lost' | 'failed' | 'unknown' | 'pending';

export interface Write {
  process: string;
  id: string;
  workload: string;
  name: string;
  resource: string;
  token: string;
  writeId: string;
  invokeAt: number;
  doneAt?: number;
  outcome: WriteOutcome;
  reason?: string;
}

/** Any operation from invoke to completion (for the timeline and the liveness demand). */
export interface Operation {
  process: string;
  id: string;
  op: string;
  workload: string;
  name: string;
  token?: string;
  invokeAt: number;
  doneAt?: number;
  type?: 'ok' | 'fail' | 'info';
  reason?: string;
}

export interface FaultWindow {
  id: string;
  fault: string;
  target: string;
  start: number;
  /** Undefined when the history ends before the fault's end line. */
  end?: number;
}

export interface Model {
  /** Sorted by `at`, then process and seq. */
  lines: HistoryLine[];
  holds: Hold[];
  writes: Write[];
  operations: Operation[];
  faults: FaultWindow[];
  processes: string[];
  startAt: number;
  endAt: number;
  lastAtByProcess: Map<string, number>;
}

const PROGRESS_OPS = new Set(['deadline', 'lost']);

export function sortHistory(history: readonly HistoryLine[]): HistoryLine[] {
  return [...history].sort(
    (a, b) =>
      a.at - b.at ||
      (a.process < b.process ? -1 : a.process > b.process ? 1 : 0) ||
      (a.seq ?? 0) - (b.seq ?? 0),
  );
}

export function outcomeOf(line: HistoryLine): WriteOutcome {
  if (line.type === 'ok') return 'ok';
  if (line.type === 'info') return 'unknown';
  if (line.reason === 'stale') return 'stale';
  if (line.reason === 'lost') return 'lost';
  return 'failed';
}

/** Folds the merged history into holds, writes, operations and fault windows. */
export function buildModel(history: readonly HistoryLine[]): Model {
  const lines = sortHistory(history);
  const holds: Hold[] = [];
  const open = new Map<string, Hold[]>(); // by process
  const writes: Write[] = [];
  const operations: Operation[] = [];
  const pendingOps = new Map<string, Operation>();
  const pendingWrites = new Map<string, Write>();
  const faults = new Map<string, FaultWindow>();
  const lastAtByProcess = new Map<string, number>();
  const pausedTokens = new Set<string>();

  const openOf = (process: string): Hold[] => {
    let list = open.get(process);
    if (!list) open.set(process, (list = []));
    return list;
  };
  const close = (hold: Hold, at: number, reason: Hold['endReason']): void => {
    hold.end = at;
    hold.endReason = reason;
    const list = openOf(hold.process);
    list.splice(list.indexOf(hold), 1);
  };

  for (const line of lines) {
    if (line.type === 'fault-start' || line.type === 'fault-end') {
      const id = String(line.id ?? `${line.fault}@${line.at}`);
      if (line.type === 'fault-start') {
        faults.set(id, {
          id,
          fault: String(line.fault),
          target: String(line.target ?? ''),
          start: line.at,
        });
      } else {
        const window = faults.get(id);
        if (window) window.end = line.at;
      }
      continue;
    }
    lastAtByProcess.set(line.process, line.at);
    if (line.paused && line.token !== undefined) pausedTokens.add(`${line.process}#${line.token}`);
    const key = `${line.process}#${String(line.id)}`;

    if (line.op === 'deadline' || line.op === 'lost') {
      const hold = openOf(line.process).find((h) => h.token === line.token);
      if (!hold) continue;
      if (line.op === 'deadline' && typeof line.deadlineAt === 'number') {
        hold.deadlines.push({ at: line.at, deadlineAt: line.deadlineAt });
      } else if (line.op === 'lost') {
        hold.lostAt = line.at;
        close(hold, line.at, 'lost');
      }
      continue;
    }

    if (line.type === 'invoke') {
      const operation: Operation = {
        process: line.process,
        id: String(line.id),
        op: String(line.op),
        workload: String(line.workload ?? 'lock'),
        name: String(line.name ?? ''),
        invokeAt: line.at,
      };
      if (line.token !== undefined) operation.token = line.token;
      operations.push(operation);
      pendingOps.set(key, operation);
      if (line.op === 'write') {
        const write: Write = {
          process: line.process,
          id: String(line.id),
          workload: String(line.workload ?? 'lock'),
          name: String(line.name ?? ''),
          resource: String(line.resource ?? ''),
          token: String(line.token ?? ''),
          writeId: String(line.writeId ?? ''),
          invokeAt: line.at,
          outcome: 'pending',
        };
        writes.push(write);
        pendingWrites.set(key, write);
      }
      if (line.op === 'release' || line.op === 'resign') {
        const kind = line.op === 'release' ? 'lock' : 'term';
        const candidates = openOf(line.process).filter(
          (h) =>
            h.kind === kind &&
            (line.token !== undefined ? h.token === line.token : h.name === line.name),
        );
        const hold = candidates[candidates.length - 1];
        if (hold) close(hold, line.at, 'release');
      }
      continue;
    }

    // A completion: ok, fail or info of an operation.
    if (PROGRESS_OPS.has(String(line.op))) continue;
    const operation = pendingOps.get(key);
    if (operation) {
      pendingOps.delete(key);
      operation.doneAt = line.at;
      operation.type = line.type;
      if (line.reason !== undefined) operation.reason = line.reason;
      if (line.token !== undefined) operation.token ??= line.token;
    }
    const write = pendingWrites.get(key);
    if (write) {
      pendingWrites.delete(key);
      write.doneAt = line.at;
      write.outcome = outcomeOf(line);
      if (line.reason !== undefined) write.reason = line.reason;
    }
    const op = line.op ?? operation?.op;
    if (line.type === 'ok' && (op === 'acquire' || op === 'campaign') && line.token !== undefined) {
      const hold: Hold = {
        kind: op === 'acquire' ? 'lock' : 'term',
        workload: String(line.workload ?? operation?.workload ?? 'lock'),
        process: line.process,
        name: String(line.name ?? operation?.name ?? ''),
        token: line.token,
        start: line.at,
        end: line.at,
        endReason: 'end-of-history',
        deadlines:
          typeof line.deadlineAt === 'number' ? [{ at: line.at, deadlineAt: line.deadlineAt }] : [],
        paused: Boolean(line.paused),
      };
      holds.push(hold);
      openOf(line.process).push(hold);
    }
  }

  for (const [process, list] of open) {
    for (const hold of [...list])
      close(hold, lastAtByProcess.get(process) ?? hold.start, 'end-of-history');
  }
  for (const hold of holds) {
    if (pausedTokens.has(`${hold.process}#${hold.token}`)) hold.paused = true;
  }
  // A write's name may be left off: take it from the hold it was made under.
  for (const write of writes) {
    if (write.name) continue;
    const hold = holds.find((h) => h.process === write.process && h.token === write.token);
    if (hold) write.name = hold.name;
  }

  const processes = [...lastAtByProcess.keys()].sort(compareProcess);
  return {
    lines,
    holds,
    writes,
    operations,
    faults: [...faults.values()],
    processes,
    startAt: lines[0]?.at ?? 0,
    endAt: lines[lines.length - 1]?.at ?? 0,
    lastAtByProcess,
  };
}

/** `w2` before `w10`. */
export function compareProcess(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}

/** The last deadline the process reported at or before `at` (undefined if none). */
export function deadlineAt(hold: Hold, at: number): number | undefined {
  let found: number | undefined;
  for (const d of hold.deadlines) if (d.at <= at) found = d.deadlineAt;
  return found;
}

/** A decimal token as a bigint; anything else sorts below every real token. */
export function tokenValue(token: string): bigint {
  return /^\d+$/.test(token) ? BigInt(token) : -1n;
}

export function compareTokens(a: string, b: string): number {
  const x = tokenValue(a);
  const y = tokenValue(b);
  return x < y ? -1 : x > y ? 1 : 0;
}
