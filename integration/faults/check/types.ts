/** Every fault kind the nemesis can inject (history `fault` field). */
export type FaultKind =
  | 'pause-holder'
  | 'kill-holder'
  | 'kill-mid-acquire'
  | 'kill-mid-release'
  | 'pause-member'
  | 'kill-member'
  | 'pause-leader'
  | 'kill-leader'
  | 'restart-cluster'
  | 'partition'
  | 'reset'
  | 'flap'
  | 'delay'
  | 'compact'
  | 'revoke-lease'
  | 'delete-key'
  | 'stall-loop'
  | 'snapshot-restore';

/** One line of history.jsonl: a worker's operation event or the nemesis's fault start/end. */
export interface HistoryLine {
  /** Wall-clock ms (`performance.timeOrigin + performance.now()`), comparable across processes. */
  at: number;
  /** `w1`, `w2`, ... for workers, `nemesis` for the fault injector. */
  process: string;
  pid?: number;
  seq?: number;
  type: 'invoke' | 'ok' | 'fail' | 'info' | 'fault-start' | 'fault-end';
  op?: 'acquire' | 'release' | 'write' | 'campaign' | 'resign' | 'cron-run' | 'lost' | 'deadline';
  id?: string | number;
  workload?: 'lock' | 'election' | 'cron' | 'unfenced';
  name?: string;
  /** Decimal string. */
  token?: string;
  resource?: string;
  writeId?: string;
  /** On `fail`: `stale`, `lost`, `timeout`, `aborted` or `error:<code>`. */
  reason?: string;
  /** The hold's local deadline, in the same clock as `at`. */
  deadlineAt?: number;
  /** Set on holds whose process was SIGSTOPped: belief overlap is expected there. */
  paused?: boolean;
  /** A FaultKind; kept a string so a newer nemesis's kinds still parse. */
  fault?: string;
  target?: string;
  seed?: number | string;
}

/** One accepted write in a resource's commit-ordered log (logs.json). */
export interface LogEntry {
  seq: number;
  name: string;
  /** Decimal string. */
  token: string;
  writeId: string;
  process: string;
  /** Optional: the checker otherwise finds it from the write's invoke line. */
  workload?: string;
}

export type ResourceLogs = Record<string, LogEntry[]>;

export interface CheckConfig {
  ttlSeconds: number;
  electionTimeoutMs: number;
  /** Allowed timer lateness for S5 and belief overlap; default 250 ms. */
  toleranceMs?: number;
  /** Fault kinds the run was asked to inject (also those it did not get to). */
  faults: string[];
  seed: number | string;
  /** False for the negative control. */
  fencing: boolean;
  /** Overrides of the per-fault liveness bounds, in ms. */
  boundsMs?: Partial<Record<string, number>>;
}

export type Rule = 'S1' | 'S2' | 'S3' | 'S4' | 'S5' | 'liveness';

export const RULES: readonly Rule[] = ['S1', 'S2', 'S3', 'S4', 'S5', 'liveness'];

export interface Violation {
  rule: Rule;
  /**
   * For S5: `late-signal` (the loss signal came after the deadline), `unsignalled` (the hold
   * was used past its deadline with no signal) or `overlap` (two processes believed at once).
   */
  kind?: 'late-signal' | 'unsignalled' | 'overlap';
  message: string;
  at?: number;
  process?: string;
  token?: string;
  resource?: string;
}
