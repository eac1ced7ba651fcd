import { hostname } from 'node:os';
import type { Session } from '@leasehold/core';
import { InvalidArgumentError } from './errors.js';
import {
  checkOptions,
  describeValue as describe,
  encodeName,
  invalid as coreInvalid,
} from '@leasehold/core/internal';

/**
 * Every default in one place. Durations carry their unit in their name: `retentionSeconds` is an
 * etcd lease TTL (etcd's own unit); everything measured locally is in milliseconds.
 */
export const defaults = {
  /** Where claims and records live. Replicas that should share jobs use the same prefix. */
  prefix: '/leasehold/cron/',
  /** A fire is skipped while the job's previous run still goes on anywhere: most jobs are not
   * written to run twice at once. */
  overlap: 'skip',
  /** A fire nobody reached in time is not run late. */
  misfire: 'skip',
  /**
   * How late (by this replica's clock) a replica may reach a fire and still claim it. Timers run
   * late under load and pauses (GC, a loaded host) stretch them further: a fire reached within
   * this is claimed even if later fires have come since; one reached later is missed.
   */
  lateToleranceMs: 5_000,
  /** With `misfire: 'run-once'`: how far back a missed fire may lie and still be caught up. */
  catchUpWindowMs: 3_600_000,
  /** Start jitter: none, so the replica whose timer fires first claims. */
  startJitterMs: 0,
  /**
   * Cron expressions are read in UTC unless a zone is given, never in the host's local zone:
   * replicas in different zones must compute the same fire times.
   */
  timeZone: 'UTC',
  /**
   * How long a fire's record is kept after its claim: a replica that reaches a fire up to this
   * late (a lagging clock, a paused process) still finds it and does not run it again.
   */
  retentionSeconds: 86_400,
  /** How long `stop()` waits for runs to return after their signal aborted. */
  drainMs: 10_000,
  /** How many records `history()` returns. */
  historyLimit: 20,
  /**
   * The most two replicas' wall clocks may disagree. Records outlive every claim a replica
   * whose clock lags by this much could still make (see `retentionSeconds`); NTP keeps hosts
   * within milliseconds, and a host 10 s off is misconfigured.
   */
  maxClockSkewMs: 10_000,
  /** How many records `inspectJobs()` returns per job. */
  inspectLimit: 5,
} as const;

/** Internal limits, with the reason for each. */
export const limits = {
  /** A shorter period would spend most of its time claiming. */
  minEveryMs: 1_000,
  /** Timers wake late by a few milliseconds at least, more under load. */
  minLateToleranceMs: 100,
  /** setTimeout fires at once for longer delays; longer waits are re-armed in steps. */
  maxTimerMs: 2 ** 31 - 1,
  /** Below this a record could expire while a replica that is a little behind still needs it. */
  minRetentionSeconds: 60,
  /** etcd's MaxLeaseTTL is 9e9 s; a retention lease is granted a little longer than retention. */
  maxRetentionSeconds: 8_000_000_000,
  /** Job names end up in every key; long ones cost every watch and range. */
  maxJobLength: 256,
  maxPrefixLength: 1_024,
  /** Missed fires reported one by one after a long stall; beyond this only the latest are. */
  maxMissedReported: 100,
  /** Error messages kept in a record. */
  maxErrorChars: 1_024,
  maxHistoryLimit: 10_000,
  maxInspectLimit: 1_000,
  /**
   * How often a run under `overlap: 'replace'` reads the job's running marker to learn that a
   * later fire replaced it on another replica: one small read per second per such run.
   */
  replaceCheckMs: 1_000,
} as const;

/**
 * What a fire does while the job's previous run is still going on some replica: `'skip'` it,
 * `'allow'` both, or `'replace'` the running one. See {@link JobOptions.overlap}.
 */
export type OverlapPolicy = 'skip' | 'allow' | 'replace';
/**
 * What happens to a fire no replica reached in time: `'skip'` it, or `'run-once'` (the latest
 * missed one). See {@link JobOptions.misfire}.
 */
export type MisfirePolicy = 'skip' | 'run-once';

/** Options of one scheduled job. */
export interface JobOptions {
  /**
   * `'skip'` (default): a fire is skipped (reason `'overlap'`) while this job's previous run is
   * still going on any replica. `'allow'`: runs of different fires may overlap. `'replace'`: a
   * fire aborts the signal of the run going on (`RunReplacedError`) and runs; its token is higher,
   * so a fenced store refuses the replaced run's writes once the new run has written.
   */
  overlap?: OverlapPolicy;
  /**
   * What happens to a fire no replica reached in time (all were down, paused or overloaded):
   * `'skip'` (default) never runs it late; `'run-once'` runs the latest missed fire once, as soon
   * as a replica starts or wakes, if it lies within `catchUpWindowMs`.
   */
  misfire?: MisfirePolicy;
  /** With `misfire: 'run-once'`: how old a missed fire may be and still be caught up. Default 1 h. */
  catchUpWindowMs?: number;
  /** How late a replica may reach a fire (by its own clock) and still claim it. Default 1000. */
  lateToleranceMs?: number;
  /** The run's `signal` aborts with `MaxRunTimeError` after this long. Default: no limit. */
  maxRunMs?: number;
  /** Wait a random time in [0, startJitterMs) before claiming. Default 0. */
  startJitterMs?: number;
  /** IANA time zone the cron expression is read in. Default `'UTC'`. Cron expressions only. */
  timeZone?: string;
  /** How long each fire's record is kept, in whole seconds (an etcd lease TTL). Default 86400. */
  retentionSeconds?: number;
}

/** Job options with every default applied. */
export interface JobSettings {
  overlap: OverlapPolicy;
  misfire: MisfirePolicy;
  catchUpWindowMs: number;
  lateToleranceMs: number;
  maxRunMs: number | undefined;
  startJitterMs: number;
  timeZone: string;
  retentionSeconds: number;
}

/** Options of {@link createScheduler}. */
export interface SchedulerOptions {
  /** Key prefix of claims and records. Default `/leasehold/cron/`. */
  prefix?: string;
  /** The runner's lease: claims are bound to it. Default: the client's shared session. */
  session?: Session;
  /** The name recorded as runner of each claim. Default `hostname:pid`. */
  runner?: string;
  /**
   * The wall clock fire times are computed from. **For tests** (to give a replica a skewed
   * clock); leave it out in production. Default `() => new Date()`.
   */
  now?: () => Date;
  /**
   * The most two replicas' clocks may disagree, in milliseconds. `schedule()` refuses a job whose
   * records would not outlive every claim a replica this far behind could make. Default 10 000.
   */
  maxClockSkewMs?: number;
}

/** The error for bad input, in core's wording, as this package's class. */
export const invalid = (name: string, allowed: string, value: unknown): InvalidArgumentError =>
  coreInvalid(name, allowed, value, InvalidArgumentError);

/**
 * A job name as its key segment. `/` and `%` are escaped, so `jobs` and `jobs/a` never share a
 * range. Names must be well-formed UTF-16: two ill-formed names could encode to the same key.
 */
export const encodeJob = (job: unknown, what = 'job'): string =>
  encodeName(job, what, { maxLength: limits.maxJobLength, as: InvalidArgumentError });

export function validatePrefix(value: unknown): string {
  if (
    typeof value === 'string' &&
    value !== '' &&
    !value.includes('\0') &&
    value.length <= limits.maxPrefixLength
  ) {
    return value;
  }
  throw invalid(
    'prefix',
    `a non-empty string without NUL of at most ${limits.maxPrefixLength} characters`,
    value,
  );
}

/**
 * An options argument: `undefined` is `{}`; anything but an object (a string, a number, an
 * array, `null`, a function) is refused, and so is a key that is not an option, so that neither
 * a misplaced argument nor a misspelt option silently falls back to the defaults.
 */
export function optionsObject(
  value: unknown,
  allowed: readonly string[],
  what = `an object { ${allowed.map((k) => `${k}?`).join(', ')} }`,
  name = 'options',
): Record<string, unknown> {
  if (value === undefined) return {};
  return checkOptions(value as Record<string, unknown>, allowed, {
    name,
    what,
    as: InvalidArgumentError,
  });
}

/** `{ limit? }` of `history()` and `inspectJobs()`: a whole number from 1 to `max`. */
export function validateLimit(value: unknown, fallback: number, max: number): number {
  const limit = value ?? fallback;
  if (!Number.isInteger(limit) || (limit as number) < 1 || (limit as number) > max) {
    throw invalid('options.limit', `a whole number from 1 to ${max}`, limit);
  }
  return limit as number;
}

function oneOf<T extends string>(name: string, value: unknown, allowed: readonly T[]): T {
  if (allowed.includes(value as T)) return value as T;
  throw invalid(name, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, value);
}

/** A finite number of milliseconds in [min, limits.maxTimerMs]. */
function ms(name: string, value: unknown, min: number, what = 'a finite number of milliseconds') {
  if (
    typeof value === 'number' &&
    Number.isFinite(value) &&
    value >= min &&
    value <= limits.maxTimerMs
  ) {
    return value;
  }
  const from = min === 0 ? '>= 0' : `>= ${min}`;
  throw invalid(name, `${what} ${from} and <= ${limits.maxTimerMs}`, value);
}

/** Whether the runtime knows `zone` as an IANA time zone (Intl throws RangeError otherwise). */
export function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

const JOB_OPTIONS = [
  'overlap',
  'misfire',
  'catchUpWindowMs',
  'lateToleranceMs',
  'maxRunMs',
  'startJitterMs',
  'timeZone',
  'retentionSeconds',
] as const;

/**
 * Validates a job's options and applies the defaults. `cron` tells whether the schedule is a
 * cron expression (a time zone means nothing for `{ everyMs }`). `maxClockSkewMs` is the
 * scheduler's: records must outlive every claim a replica that far behind could make.
 */
export function jobSettings(
  options: unknown,
  cron: boolean,
  maxClockSkewMs: number = defaults.maxClockSkewMs,
): JobSettings {
  const o = optionsObject(options, JOB_OPTIONS, 'an object of job options') as JobOptions;
  const retentionSeconds = o.retentionSeconds ?? defaults.retentionSeconds;
  if (
    !Number.isInteger(retentionSeconds) ||
    retentionSeconds < limits.minRetentionSeconds ||
    retentionSeconds > limits.maxRetentionSeconds
  ) {
    throw invalid(
      'options.retentionSeconds',
      `a whole number of seconds from ${limits.minRetentionSeconds} to ${limits.maxRetentionSeconds}`,
      retentionSeconds,
    );
  }
  const misfire = oneOf('options.misfire', o.misfire ?? defaults.misfire, ['skip', 'run-once']);
  if (o.catchUpWindowMs !== undefined && misfire !== 'run-once') {
    throw new InvalidArgumentError(
      `options.catchUpWindowMs is only used with misfire: 'run-once' (misfire is '${misfire}'); leave it out or set misfire: 'run-once'`,
    );
  }
  const catchUpWindowMs = ms(
    'options.catchUpWindowMs',
    o.catchUpWindowMs ?? defaults.catchUpWindowMs,
    1,
  );
  // Timers wake a few milliseconds late: a tolerance below this would miss nearly every fire.
  const lateToleranceMs = ms(
    'options.lateToleranceMs',
    o.lateToleranceMs ?? defaults.lateToleranceMs,
    limits.minLateToleranceMs,
  );
  const startJitterMs = ms('options.startJitterMs', o.startJitterMs ?? defaults.startJitterMs, 0);
  checkRetention({
    retentionSeconds,
    windowMs: misfire === 'run-once' ? Math.max(catchUpWindowMs, lateToleranceMs) : lateToleranceMs,
    window:
      misfire === 'run-once' && catchUpWindowMs >= lateToleranceMs
        ? 'catchUpWindowMs'
        : 'lateToleranceMs',
    startJitterMs,
    maxClockSkewMs,
  });
  const timeZone = o.timeZone ?? defaults.timeZone;
  if (o.timeZone !== undefined && !cron) {
    throw new InvalidArgumentError(
      `options.timeZone applies to cron expressions only; { everyMs } fires are aligned to the Unix epoch and have no zone (got ${describe(o.timeZone)})`,
    );
  }
  if (typeof timeZone !== 'string' || !isTimeZone(timeZone)) {
    throw invalid(
      'options.timeZone',
      'an IANA time zone this runtime knows, such as "UTC", "Europe/Berlin" or "America/New_York"',
      timeZone,
    );
  }
  return {
    overlap: oneOf('options.overlap', o.overlap ?? defaults.overlap, ['skip', 'allow', 'replace']),
    misfire,
    catchUpWindowMs,
    lateToleranceMs,
    maxRunMs: o.maxRunMs === undefined ? undefined : ms('options.maxRunMs', o.maxRunMs, 1),
    startJitterMs,
    timeZone,
    retentionSeconds,
  };
}

/**
 * A fire's record must exist as long as any replica may still claim the fire, or a replica
 * that reaches it late would claim it again and run it twice. The record lives at least
 * `retentionSeconds` from its claim, made when the fire came by the clock of the replica that
 * runs furthest ahead; a replica claims the fire up to the window (+ its start jitter) after it
 * came by its own clock, which may lag the first by `maxClockSkewMs`. So retention must exceed
 * window + jitter + skew. (The claim itself also checks, before it is sent, that it can land
 * before such a record expires: a stall between the plan and the claim cannot break it.)
 */
function checkRetention(input: {
  retentionSeconds: number;
  windowMs: number;
  window: 'catchUpWindowMs' | 'lateToleranceMs';
  startJitterMs: number;
  maxClockSkewMs: number;
}): void {
  const { retentionSeconds, windowMs, window, startJitterMs, maxClockSkewMs } = input;
  const needMs = windowMs + startJitterMs + maxClockSkewMs;
  if (needMs < retentionSeconds * 1000) return;
  const jitter = startJitterMs > 0 ? ` + startJitterMs (${startJitterMs} ms)` : '';
  throw new InvalidArgumentError(
    `options.retentionSeconds (${retentionSeconds} s = ${retentionSeconds * 1000} ms) must be more than options.${window} (${windowMs} ms)${jitter} + maxClockSkewMs (${maxClockSkewMs} ms) = ${needMs} ms: a replica whose clock lags by maxClockSkewMs could claim a fire after its record expired and run it twice; raise retentionSeconds, or lower ${window}${jitter ? ' or startJitterMs' : ''} (or the scheduler's maxClockSkewMs, if clocks are known to agree better)`,
  );
}

/** Validated scheduler options, with defaults. */
export function schedulerSettings(options: unknown) {
  const o = optionsObject(
    options,
    ['prefix', 'session', 'runner', 'now', 'maxClockSkewMs'],
    'an object of scheduler options',
  ) as SchedulerOptions;
  const runner = o.runner ?? `${hostname()}:${process.pid}`;
  if (typeof runner !== 'string' || runner === '' || runner.length > 1024) {
    throw invalid('options.runner', 'a non-empty string of at most 1024 characters', runner);
  }
  if (o.now !== undefined && typeof o.now !== 'function') {
    throw invalid('options.now', 'a function returning the current time as a Date', o.now);
  }
  const session = o.session;
  if (
    session !== undefined &&
    (typeof session !== 'object' ||
      session === null ||
      typeof (session as Partial<Session>).leaseId !== 'bigint' ||
      !((session as Partial<Session>).signal instanceof AbortSignal))
  ) {
    throw invalid('options.session', 'a Session from client.session()', session);
  }
  return {
    prefix: validatePrefix(o.prefix ?? defaults.prefix),
    session,
    runner,
    now: o.now ?? (() => new Date()),
    maxClockSkewMs: validateSkewMs(o.maxClockSkewMs),
  };
}

/** `maxClockSkewMs` of the scheduler and the coordinator. */
export function validateSkewMs(value: unknown): number {
  return ms('options.maxClockSkewMs', value ?? defaults.maxClockSkewMs, 0);
}

/** `stop({ drainMs })`. */
export function validateDrainMs(value: unknown): number {
  return ms('drainMs', value ?? defaults.drainMs, 0);
}
