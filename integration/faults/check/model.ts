import type { HistoryLine } from './types.js';

/** One read of a hold by its process (`isHeld`), with the raw deadline it was held to. */
export interface Check {
  at: number;
  readAt: number;
  held: boolean;
  deadlineAt?: number;
}

/**
 * A lock hold (`acquire` ok), an election term (`campaign` ok) or a cron run (`cron-run` ok), as
 * its process believed it.
 */
export interface Hold {
  kind: 'lock' | 'term' | 'cron';
  workload: string;
  process: string;
  name: string;
  token: string;
  start: number;
  /**
   * When the belief ended: the loss signal, a read that said lost, the release/resign invoke (a
   * cron run's end), or the process's last line.
   */
  end: number;
  endReason: 'lost' | 'read' | 'release' | 'end-of-history';
  lostAt?: number;
  /** The `lost` line itself: its raw deadline, the SDK's reason and the process's overdue lag. */
  lost?: HistoryLine;
  /** Local deadlines in the order the process reported them. */
  deadlines: { at: number; deadlineAt: number }[];
  checks: Check[];
  /** Cron runs: the fire (ms since the epoch). */
  fireMs?: number;
  /** The key and lease the grant reported. */
  key?: string;
  leaseId?: string;
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
  /** The raw local deadline when the write was sent. */
  deadlineAt?: number;
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
  /** The SDK's own reason on a failure (`expired-in-queue`…). */
  detail?: string;
  /** The raw local deadline on the completion line, if any. */
  deadlineAt?: number;
}

export interface FaultWindow {
  id: string;
  fault: string;
  target: string;
  start: number;
  /** Undefined when the history ends before the fault's end line. */
  end?: number;
  /** The fault's start and end lines merged (token, ms, sentAt/ackAt, delayMs, skewMs…). */
  detail: HistoryLine;
}

export interface Model {
  /** Sorted by `at`, then process and seq. */
  lines: HistoryLine[];
  holds: Hold[];
  writes: Write[];
  operations: Operation[];
  faults: FaultWindow[];
  processes: string[];
  /** The workload each process ran (from its lines). */
  workloadOf: Map<string, string>;
  /** Each process's lag samples (`lag` lines), in time order. */
  lags: Map<string, { at: number; ms: number }[]>;
  /** Each process's round trips to etcd (`rtt` lines), in time order. */
  rtts: Map<string, { at: number; ms: number }[]>;
  /** Cron claims and skips, as the replicas reported them. */
  cronEvents: HistoryLine[];
  /** When each process said it was ready (a cron replica: its job is scheduled). */
  readyAt: Map<string, number[]>;
  /** When each process was told to stop (it claims nothing after that). */
  stoppingAt: Map<string, number>;
  /**
   * Each key's deletions by etcd: the revision of the delete and when the observer heard of it
   * (a watch that fell behind hears late, never early), in time order.
   */
  deletes: Map<string, { at: number; revision: bigint }[]>;
  startAt: number;
  endAt: number;
  lastAtByProcess: Map<string, number>;
}

const PROGRESS_OPS = new Set(['deadline', 'lost', 'check', 'lag', 'rtt']);
const GRANTS: Record<string, Hold['kind']> = {
  acquire: 'lock',
  campaign: 'term',
  'cron-run': 'cron',
};

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
  const workloadOf = new Map<string, string>();
  const lags = new Map<string, { at: number; ms: number }[]>();
  const rtts = new Map<string, { at: number; ms: number }[]>();
  const cronEvents: HistoryLine[] = [];
  const readyAt = new Map<string, number[]>();
  const stoppingAt = new Map<string, number>();
  const deletes = new Map<string, { at: number; revision: bigint }[]>();

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
          detail: { ...line },
        });
      } else {
        const window = faults.get(id);
        if (window) {
          window.end = line.at;
          window.detail = { ...window.detail, ...line, at: window.start };
        }
      }
      continue;
    }
    if (line.op === 'server-delete' && line.key !== undefined) {
      let list = deletes.get(line.key);
      if (!list) deletes.set(line.key, (list = []));
      list.push({ at: line.at, revision: tokenValue(line.revision ?? '') });
      continue;
    }
    if ((line.op === 'lag' || line.op === 'rtt') && typeof line.ms === 'number') {
      const samples = line.op === 'lag' ? lags : rtts;
      let list = samples.get(line.process);
      if (!list) samples.set(line.process, (list = []));
      list.push({ at: line.at, ms: line.ms });
      if (line.process === 'runner') continue;
    }
    lastAtByProcess.set(line.process, line.at);
    if (line.workload !== undefined && !workloadOf.has(line.process)) {
      workloadOf.set(line.process, line.workload);
    }
    if (line.op === 'cron-claim' || line.op === 'cron-skip') cronEvents.push(line);
    if (line.op === 'stopping' && !stoppingAt.has(line.process))
      stoppingAt.set(line.process, line.at);
    if (line.op === 'ready') {
      let list = readyAt.get(line.process);
      if (!list) readyAt.set(line.process, (list = []));
      list.push(line.at);
    }
    const key = `${line.process}#${String(line.id)}`;

    if (line.op === 'deadline' || line.op === 'lost' || line.op === 'check') {
      const hold = openOf(line.process).find((h) => h.token === line.token);
      if (!hold) continue;
      if (typeof line.deadlineAt === 'number' && line.op !== 'lost') {
        hold.deadlines.push({ at: line.at, deadlineAt: line.deadlineAt });
      }
      if (line.op === 'check') {
        const check: Check = {
          at: line.at,
          readAt: line.readAt ?? line.at,
          held: line.held !== false,
        };
        if (typeof line.deadlineAt === 'number') check.deadlineAt = line.deadlineAt;
        hold.checks.push(check);
        if (!check.held) close(hold, check.readAt, 'read');
      } else if (line.op === 'lost') {
        hold.lostAt = line.at;
        hold.lost = line;
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
        if (typeof line.deadlineAt === 'number') write.deadlineAt = line.deadlineAt;
        writes.push(write);
        pendingWrites.set(key, write);
      }
      if (line.op === 'release' || line.op === 'resign') {
        const kinds = line.op === 'release' ? ['lock', 'cron'] : ['term'];
        const candidates = openOf(line.process).filter(
          (h) =>
            kinds.includes(h.kind) &&
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
      if (line.detail !== undefined) operation.detail = line.detail;
      if (typeof line.deadlineAt === 'number') operation.deadlineAt = line.deadlineAt;
      if (line.token !== undefined) operation.token ??= line.token;
    }
    const write = pendingWrites.get(key);
    if (write) {
      pendingWrites.delete(key);
      write.doneAt = line.at;
      write.outcome = outcomeOf(line);
      if (line.reason !== undefined) write.reason = line.reason;
    }
    const op = String(line.op ?? operation?.op);
    const kind = GRANTS[op];
    if (line.type === 'ok' && kind && line.token !== undefined) {
      const hold: Hold = {
        kind,
        workload: String(line.workload ?? operation?.workload ?? 'lock'),
        process: line.process,
        name: String(line.name ?? operation?.name ?? ''),
        token: line.token,
        start: line.at,
        end: line.at,
        endReason: 'end-of-history',
        deadlines:
          typeof line.deadlineAt === 'number' ? [{ at: line.at, deadlineAt: line.deadlineAt }] : [],
        checks: [],
      };
      if (line.fireTime !== undefined) hold.fireMs = Date.parse(line.fireTime);
      if (line.key !== undefined) hold.key = line.key;
      if (line.leaseId !== undefined) hold.leaseId = line.leaseId;
      holds.push(hold);
      openOf(line.process).push(hold);
    }
  }

  for (const [process, list] of open) {
    for (const hold of [...list])
      close(hold, lastAtByProcess.get(process) ?? hold.start, 'end-of-history');
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
    workloadOf,
    lags,
    rtts,
    cronEvents,
    readyAt,
    stoppingAt,
    deletes,
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

/**
 * The first moment at or after `t` that `process` could run its timers: `t` itself, unless a
 * block of its event loop (a lag sample: measured when the block ended, `ms` after the tick was
 * due) covered it, then the end of that block, and so on through blocks that follow each other
 * within one resolution. A timer due at `t` can fire no sooner, and has no excuse to fire later.
 */
export function freeAfter(model: Model, process: string, t: number, resolutionMs: number): number {
  let free = t;
  for (const sample of model.lags.get(process) ?? []) {
    if (sample.at <= free) continue;
    if (sample.at - sample.ms - resolutionMs > free) break;
    free = sample.at;
  }
  return free;
}

/** How many of a process's latest round-trip samples stand for its round trip now. */
const RTT_SAMPLES = 4;

/**
 * The process's round trip to etcd as it stood at `t`: the worst of its last few samples before
 * `t` (0 with none), so one quick read does not stand for a slow moment.
 */
export function rttAt(model: Model, process: string, t: number): number {
  const before = (model.rtts.get(process) ?? []).filter((s) => s.at <= t);
  return Math.max(0, ...before.slice(-RTT_SAMPLES).map((s) => s.ms));
}
