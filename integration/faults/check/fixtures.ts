import type { CheckConfig, HistoryLine, LogEntry, ResourceLogs } from './types.js';

/** Time zero of synthetic histories (ms); builders take times relative to it. */
export const T0 = 1_700_000_000_000;

export const CONFIG: CheckConfig = {
  ttlSeconds: 2,
  electionTimeoutMs: 1000,
  attemptTimeoutMs: 1000,
  callTimeoutMs: 1500,
  recheckIntervalMs: 1000,
  lagResolutionMs: 20,
  faults: [],
  seed: 42,
  fencing: true,
};

/** The fire at `at` ms after T0, rounded down to a whole second (fires are on the second). */
export const fireAt = (at: number): number => Math.floor((T0 + at) / 1000) * 1000;

type Outcome = 'ok' | 'stale' | 'lost' | 'info' | 'timeout' | 'none';

interface WriteSpec {
  name?: string;
  token: string | number;
  resource?: string;
  at: number;
  outcome?: Outcome;
  workload?: HistoryLine['workload'];
  /** ms from invoke to its answer; default 2. */
  takesMs?: number;
  /** The raw deadline on the invoke (ms after T0). */
  deadlineAt?: number;
}

/**
 * Builds synthetic histories for the checker's unit tests: each call appends the lines a real
 * worker or the nemesis would write, with times in ms after T0.
 */
export class HistoryBuilder {
  readonly lines: HistoryLine[] = [];
  private readonly seqs = new Map<string, number>();
  private ids = 0;
  private readonly waits = new Map<
    string,
    { id: string; op: 'acquire' | 'campaign'; name: string; workload: HistoryLine['workload'] }
  >();
  private writes = 0;
  /** Accepted writes in commit order, per resource (what logsFromAcks returns). */
  private readonly accepted: { at: number; resource: string; entry: Omit<LogEntry, 'seq'> }[] = [];

  line(
    process: string,
    at: number,
    fields: Partial<HistoryLine> & Pick<HistoryLine, 'type'>,
  ): this {
    const seq = (this.seqs.get(process) ?? 0) + 1;
    this.seqs.set(process, seq);
    this.lines.push({ at: T0 + at, process, pid: 1000 + process.length, seq, ...fields });
    return this;
  }

  /** An acquire (or campaign) granted at `at`, whose local deadline is `deadlineMs` after. */
  acquire(
    process: string,
    name: string,
    token: string | number,
    at: number,
    options: {
      deadlineMs?: number;
      waitedMs?: number;
      workload?: HistoryLine['workload'];
      key?: string;
    } = {},
  ): this {
    const id = `op${++this.ids}`;
    const workload = options.workload ?? 'lock';
    const op = workload === 'election' ? 'campaign' : 'acquire';
    this.line(process, at - (options.waitedMs ?? 5), { type: 'invoke', op, id, workload, name });
    const ok: Partial<HistoryLine> = { op, id, workload, name, token: String(token) };
    if (options.deadlineMs !== undefined) ok.deadlineAt = T0 + at + options.deadlineMs;
    if (options.key !== undefined) ok.key = options.key;
    return this.line(process, at, { type: 'ok', ...ok });
  }

  /** An acquire that is still waiting (or was cut off) from `at`; see `granted`. */
  waiting(
    process: string,
    name: string,
    at: number,
    workload: HistoryLine['workload'] = 'lock',
  ): this {
    const op = workload === 'election' ? 'campaign' : 'acquire';
    const id = `op${++this.ids}`;
    this.waits.set(process, { id, op, name, workload });
    return this.line(process, at, { type: 'invoke', op, id, workload, name });
  }

  /** The process's waiting acquire is granted at `at`. */
  granted(process: string, token: string | number, at: number, deadlineMs?: number): this {
    const wait = this.waits.get(process);
    if (!wait) throw new Error(`${process} is not waiting`);
    this.waits.delete(process);
    const ok: Partial<HistoryLine> = { ...wait, token: String(token) };
    if (deadlineMs !== undefined) ok.deadlineAt = T0 + at + deadlineMs;
    return this.line(process, at, { type: 'ok', ...ok });
  }

  deadline(process: string, token: string | number, at: number, deadlineAt: number): this {
    return this.line(process, at, {
      type: 'info',
      op: 'deadline',
      token: String(token),
      deadlineAt: T0 + deadlineAt,
    });
  }

  /** A loss signal; `deadlineAt` (ms after T0) is the raw deadline the line reports. */
  lost(
    process: string,
    token: string | number,
    at: number,
    options: { deadlineAt?: number; detail?: string; lagNow?: number } = {},
  ): this {
    const fields: Partial<HistoryLine> = {
      op: 'lost',
      token: String(token),
      reason: 'LEASE_LOST',
      detail: options.detail ?? 'session',
    };
    if (options.deadlineAt !== undefined) fields.deadlineAt = T0 + options.deadlineAt;
    if (options.lagNow !== undefined) fields.lagNow = options.lagNow;
    return this.line(process, at, { type: 'info', ...fields });
  }

  /** A read of the hold that began at `at` and said `held`, with the raw deadline after it. */
  check(
    process: string,
    token: string | number,
    at: number,
    held: boolean,
    deadlineAt: number,
  ): this {
    return this.line(process, at + 1, {
      type: 'info',
      op: 'check',
      token: String(token),
      held,
      readAt: T0 + at,
      deadlineAt: T0 + deadlineAt,
    });
  }

  /** The process's ticker ran `ms` late, measured at `at`. */
  lag(process: string, at: number, ms: number): this {
    return this.line(process, at, { type: 'info', op: 'lag', ms });
  }

  /** The observer heard etcd delete `key` at `at`, at `revision`. */
  serverDelete(key: string, at: number, revision: number): this {
    return this.line('observer', at, {
      type: 'info',
      op: 'server-delete',
      key,
      revision: String(revision),
    });
  }

  /** The process's read took `ms` to come back from etcd, measured at `at`. */
  rtt(process: string, at: number, ms: number): this {
    return this.line(process, at, { type: 'info', op: 'rtt', ms });
  }

  /** A cron replica says it is ready (its job is scheduled). */
  ready(process: string, at: number): this {
    return this.line(process, at, { type: 'info', op: 'ready', workload: 'cron', name: 'cron-a' });
  }

  cronClaim(process: string, fireMs: number, token: string | number, at: number): this {
    return this.line(process, at, {
      type: 'info',
      op: 'cron-claim',
      workload: 'cron',
      name: 'cron-a',
      fireTime: new Date(fireMs).toISOString(),
      token: String(token),
    });
  }

  cronSkip(process: string, fireMs: number, reason: string, at: number): this {
    return this.line(process, at, {
      type: 'info',
      op: 'cron-skip',
      workload: 'cron',
      name: 'cron-a',
      fireTime: new Date(fireMs).toISOString(),
      reason,
    });
  }

  release(
    process: string,
    name: string,
    at: number,
    workload: HistoryLine['workload'] = 'lock',
  ): this {
    const id = `op${++this.ids}`;
    const op = workload === 'election' ? 'resign' : 'release';
    this.line(process, at, { type: 'invoke', op, id, workload, name });
    return this.line(process, at + 1, { type: 'ok', op, id, workload, name });
  }

  /** A write; an `ok` one is also appended to the resource's log (see logsFromAcks). */
  write(process: string, spec: WriteSpec): string {
    const id = `op${++this.ids}`;
    const writeId = `${process}-${++this.writes}`;
    const resource = spec.resource ?? 'memory';
    const name = spec.name ?? 'L';
    const workload = spec.workload ?? 'lock';
    const token = String(spec.token);
    const common = { op: 'write' as const, id, workload, name, resource, writeId };
    const deadline = spec.deadlineAt === undefined ? {} : { deadlineAt: T0 + spec.deadlineAt };
    this.line(process, spec.at, { type: 'invoke', ...common, token, ...deadline });
    const done = spec.at + (spec.takesMs ?? 2);
    const outcome = spec.outcome ?? 'ok';
    if (outcome === 'ok') {
      this.line(process, done, { type: 'ok', ...common, token });
      this.accepted.push({ at: done, resource, entry: { name, token, writeId, process } });
    } else if (outcome === 'info') {
      this.line(process, done, { type: 'info', ...common, token });
    } else if (outcome !== 'none') {
      this.line(process, done, { type: 'fail', ...common, token, reason: outcome });
    }
    return writeId;
  }

  /** A cron run of the fire at `fireMs` (epoch ms; default the second at `at`), started at `at`. */
  cronRun(
    process: string,
    name: string,
    token: string | number,
    at: number,
    durationMs: number,
    fireMs = fireAt(at),
  ): this {
    const id = `op${++this.ids}`;
    const fireTime = new Date(fireMs).toISOString();
    this.line(process, at, {
      type: 'invoke',
      op: 'cron-run',
      id,
      workload: 'cron',
      name,
      fireTime,
    });
    this.line(process, at + 1, {
      type: 'ok',
      op: 'cron-run',
      id,
      workload: 'cron',
      name,
      token: String(token),
      fireTime,
    });
    const rid = `op${++this.ids}`;
    const end = {
      op: 'release' as const,
      id: rid,
      workload: 'cron' as const,
      name,
      token: String(token),
    };
    this.line(process, at + durationMs, { type: 'invoke', ...end });
    return this.line(process, at + durationMs, { type: 'ok', ...end });
  }

  /** A fault window; `extra` goes on both lines (times in it are ms after T0: sentAt, ackAt). */
  fault(
    fault: string,
    target: string,
    start: number,
    end?: number,
    extra: Partial<HistoryLine> = {},
  ): this {
    const id = `f${++this.ids}`;
    const fields = { ...extra };
    if (fields.sentAt !== undefined) fields.sentAt += T0;
    if (fields.ackAt !== undefined) fields.ackAt += T0;
    this.line('nemesis', start, { type: 'fault-start', fault, target, id, seed: 42, ...fields });
    if (end !== undefined)
      this.line('nemesis', end, { type: 'fault-end', fault, target, id, seed: 42, ...fields });
    return this;
  }

  /** The resources' logs as a correct store would keep them: every acknowledged write, in order. */
  logsFromAcks(): ResourceLogs {
    const logs: ResourceLogs = {};
    const ordered = [...this.accepted].sort((a, b) => a.at - b.at);
    for (const { resource, entry } of ordered) {
      const list = (logs[resource] ??= []);
      list.push({ seq: list.length + 1, ...entry });
    }
    return logs;
  }
}

/** A log written directly: [process, token, name?] per accepted write, in commit order. */
export function log(entries: [string, number, string?][], writeIdPrefix = 'x'): LogEntry[] {
  return entries.map(([process, token, name], i) => ({
    seq: i + 1,
    name: name ?? 'L',
    token: String(token),
    writeId: `${writeIdPrefix}-${i + 1}`,
    process,
  }));
}

export interface SimulationOptions {
  rounds: number;
  workers?: number;
  fencing?: boolean;
  /** Rounds whose holder is frozen past its TTL (a pause-holder fault and its zombie write). */
  pauseRounds?: number[];
  /** Rounds followed by a short partition of the next holder. */
  partitionRounds?: number[];
}

/**
 * A plausible lock-workload run: workers take turns holding L, each writing to three resources;
 * a paused holder wakes after its successor's writes and tries once more with its old token,
 * which a fenced store rejects and an unfenced one accepts (an S1 violation).
 */
export function simulate(options: SimulationOptions): {
  builder: HistoryBuilder;
  history: HistoryLine[];
  logs: ResourceLogs;
} {
  const { rounds, workers = 3, fencing = true, pauseRounds = [], partitionRounds = [] } = options;
  const b = new HistoryBuilder();
  const resources = ['memory', 'postgres', 'redis'];
  let t = 10;
  let token = 100;
  for (let round = 0; round < rounds; round++) {
    const holder = `w${(round % workers) + 1}`;
    const next = `w${((round + 1) % workers) + 1}`;
    token += 1 + (round % 3);
    const mine = token;
    b.acquire(holder, 'L', mine, t, { deadlineMs: 1500, waitedMs: 30 });
    if (round % 7 === 3)
      b.cronRun(`w${workers + 1}`, 'report', 5000 + round, t, 120, fireAt(round * 1000));
    for (const [i, resource] of resources.entries())
      b.write(holder, { token: mine, resource, at: t + 20 + i * 15 });
    if (pauseRounds.includes(round)) {
      const pausedAt = t + 80;
      b.fault('pause-holder', holder, pausedAt, pausedAt + 3000);
      b.line(holder, pausedAt, {
        type: 'info',
        op: 'deadline',
        token: String(mine),
        deadlineAt: T0 + pausedAt + 1400,
      });
      token += 1;
      const successor = token;
      b.acquire(next, 'L', successor, pausedAt + 2000, { deadlineMs: 1500, waitedMs: 1900 });
      for (const [i, resource] of resources.entries())
        b.write(next, { token: successor, resource, at: pausedAt + 2020 + i * 15 });
      b.release(next, 'L', pausedAt + 2100);
      // The holder wakes (its ticker ran the whole freeze late), writes with its old token
      // before its signal fires, then learns.
      b.lag(holder, pausedAt + 3001, 3000);
      b.write(holder, {
        token: mine,
        resource: 'postgres',
        at: pausedAt + 3010,
        outcome: fencing ? 'stale' : 'ok',
      });
      b.write(holder, {
        token: mine,
        resource: 'memory',
        at: pausedAt + 3015,
        outcome: fencing ? 'lost' : 'ok',
      });
      b.lost(holder, mine, pausedAt + 3020);
      t = pausedAt + 3100;
      continue;
    }
    b.deadline(holder, mine, t + 60, t + 1600);
    b.release(holder, 'L', t + 90);
    t += 110;
    if (partitionRounds.includes(round)) {
      b.fault('partition', next, t, t + 600);
      t += 700;
    }
  }
  return { builder: b, history: b.lines, logs: b.logsFromAcks() };
}
