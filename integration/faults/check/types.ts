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
  | 'snapshot-restore'
  | 'clock-skew'
  | 'partition-member'
  | 'partition-leader'
  | 'quorum-loss'
  | 'replace-member'
  | 'wipe-member'
  | 'slow-links';

/** One line of history.jsonl: a worker's operation event or the nemesis's fault start/end. */
export interface HistoryLine {
  /** Wall-clock ms (`performance.timeOrigin + performance.now()`), comparable across processes. */
  at: number;
  /**
   * `w1`, `w2`, ... for workers, `nemesis` for the fault injector, `runner` for its own lag,
   * `observer` for the deletions etcd made.
   */
  process: string;
  pid?: number;
  seq?: number;
  type: 'invoke' | 'ok' | 'fail' | 'info' | 'fault-start' | 'fault-end';
  op?:
    | 'acquire'
    | 'release'
    | 'write'
    | 'campaign'
    | 'resign'
    | 'proclaim'
    | 'cron-run'
    | 'cron-claim'
    | 'cron-skip'
    | 'cron-error'
    | 'server-delete'
    | 'lost'
    | 'deadline'
    | 'check'
    | 'lag'
    | 'rtt'
    | 'skew'
    | 'stall'
    | 'ready'
    | 'stopping'
    | 'exit'
    | 'cluster-changed'
    | 'reconnected'
    | 'scheduler-failed';
  id?: string | number;
  workload?: 'lock' | 'election' | 'cron' | 'unfenced';
  name?: string;
  /** Decimal string. */
  token?: string;
  resource?: string;
  writeId?: string;
  /** On `fail`: `stale`, `lost`, `timeout`, `aborted` or `error:<code>`. */
  reason?: string;
  /** The SDK's own reason of a loss (`deadline`, `gone`, `deleted`, `expired-in-queue`…). */
  detail?: string;
  /**
   * The session's raw local deadline (`deadlineAtMs`, kept once lost) on the clock of `at`: on
   * grants, `deadline` lines, `check` lines, write invokes and `lost` lines.
   */
  deadlineAt?: number;
  /** `check`: what the read said, and when it began. */
  held?: boolean;
  readAt?: number;
  /**
   * `lag`: how late the process's ticker ran; `rtt`: its read's round trip to etcd; `fault-start`:
   * how long the fault lasts.
   */
  ms?: number;
  /** `lost`: how overdue the process's ticker was at that moment. */
  lagNow?: number;
  /** Grants: how long the worker means to keep the hold. */
  holdMs?: number;
  /** Cron lines: the fire (ISO 8601). */
  fireTime?: string;
  /** A FaultKind; kept a string so a newer nemesis's kinds still parse. */
  fault?: string;
  target?: string;
  seed?: number | string;
  /** Deletion faults (`fault-end`): when the deletion was sent and acknowledged. */
  sentAt?: number;
  ackAt?: number;
  /** `clock-skew`: how far the replica's clock was moved. */
  skewMs?: number;
  /** `delay`, `slow-links`: the delay added; `slow-links`: to which member. */
  delayMs?: number;
  member?: string;
  /** Member partitions (`fault-end`): the member leading at the end of the cut, or `none`. */
  leader?: string;
  /** Grants: the hold's key; `server-delete`: the key etcd deleted, at `revision`. */
  key?: string;
  revision?: string;
  leaseId?: string;
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
  /** The SDK's deadline for one attempt on one member. Default 1000. */
  attemptTimeoutMs?: number;
  /** The SDK's deadline for a whole call (all its attempts). Default 5000. */
  callTimeoutMs?: number;
  /** How often the workers' clients re-read their prefixes (`recheckIntervalMs`). Default 5000. */
  recheckIntervalMs?: number;
  /**
   * The period of the processes' lag tickers: lag is measured to within it, so it is added to
   * every bound that uses measured lag. Default 20.
   */
  lagResolutionMs?: number;
  /** The cron workload's schedule (every `everyMs`) and late tolerance. */
  cron?: { everyMs: number; lateToleranceMs: number };
  /** Fault kinds the run was asked to inject: each must have got in (`coverage`). */
  faults: string[];
  seed: number | string;
  /** False for the negative control. */
  fencing: boolean;
  /** Overrides of the per-fault liveness bounds, in ms. */
  boundsMs?: Partial<Record<string, number>>;
}

export type Rule = 'S1' | 'S2' | 'S3' | 'S4' | 'S5' | 'S6' | 'S7' | 'S8' | 'liveness' | 'coverage';

export const RULES: readonly Rule[] = [
  'S1',
  'S2',
  'S3',
  'S4',
  'S5',
  'S6',
  'S7',
  'S8',
  'liveness',
  'coverage',
];

export interface Violation {
  rule: Rule;
  /**
   * S5: `late-signal` (after the deadline + lag), `late-deletion-signal` (after the deletion + one
   * round trip + lag), `unsignalled` (used past its deadline with no signal), `held-after-deadline`
   * (a read said held once the clock had passed the deadline). S6: `lock` or `term`. S7: `beliefs`
   * or `fenced-row`. Liveness: `recovery`, `takeover`, `lock-free`, `fence` or `cron-fire`.
   */
  kind?: string;
  message: string;
  at?: number;
  process?: string;
  token?: string;
  resource?: string;
}
