/**
 * Every error `@leasehold/cron` throws (or puts on a run's `signal`) extends {@link CronError}: a
 * stable `code`, a `name` equal to its class name, and the underlying failure as `cause`.
 *
 * Use the `isX(err)` guards rather than `instanceof`: they check a brand registered with
 * `Symbol.for`, so they keep working when two copies of the package are installed. The brand is
 * this package's own; errors of `@leasehold/core` that pass through (an unreachable etcd, a lost
 * lease) keep theirs and answer to core's guards.
 */
const BRAND = Symbol.for('leasehold.cron.error');

/** The stable `code` of every {@link CronError}, one per error class. */
export type CronErrorCode =
  'INVALID_ARGUMENT' | 'SCHEDULER_STOPPED' | 'MAX_RUN_TIME' | 'LEASE_AT_RISK' | 'RUN_REPLACED';

/**
 * The base of every error `@leasehold/cron` throws or puts on a run's `signal`: `name` is the
 * class name, `code` a stable {@link CronErrorCode}, `cause` the underlying failure where there is
 * one. Test for it with {@link isCronError}.
 */
export class CronError extends Error {
  /** Which failure this is; one value per class, stable across releases. */
  declare readonly code: CronErrorCode;

  /** Made by the scheduler where the failure happens; exported for `instanceof` and tests. */
  constructor(code: CronErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    Object.defineProperty(this, 'code', { value: code, enumerable: true });
    Object.defineProperty(this, BRAND, { value: code });
    this.name = new.target.name;
  }
}

/**
 * The brand every leasehold package's `InvalidArgumentError` carries (core's and fence's too), so
 * each package's `isInvalidArgumentError` answers for all of them.
 */
const INVALID_ARGUMENT_BRAND = Symbol.for('leasehold.invalid-argument');

/**
 * Bad input: the message names the value and what is allowed. Thrown where the call is made.
 * `isInvalidArgumentError` (this package's, core's or fence's) answers for it.
 */
export class InvalidArgumentError extends CronError {
  /** Made by the scheduler where the failure happens; exported for `instanceof` and tests. */
  constructor(message: string, options?: { cause?: unknown }) {
    super('INVALID_ARGUMENT', message, options);
    Object.defineProperty(this, INVALID_ARGUMENT_BRAND, { value: true });
  }
}

/**
 * The scheduler was stopped: `schedule()` after `stop()` throws it, and it is the reason on the
 * `signal` of every run that was still going when `stop()` was called.
 */
export class SchedulerStoppedError extends CronError {
  /** Made by the scheduler where the failure happens; exported for `instanceof` and tests. */
  constructor() {
    super('SCHEDULER_STOPPED', 'the scheduler was stopped; create a new one to schedule again');
  }
}

/** The reason on a run's `signal` when the run passed its job's `maxRunMs`. */
export class MaxRunTimeError extends CronError {
  /** Made by the scheduler where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The job whose run took too long. */
    readonly job: string,
    /** The fire the run was for. */
    readonly fireTime: Date,
    /** The job's `maxRunMs`. */
    readonly maxRunMs: number,
  ) {
    super(
      'MAX_RUN_TIME',
      `the run of job ${JSON.stringify(job)} for the fire at ${fireTime.toISOString()} passed maxRunMs (${maxRunMs} ms)`,
    );
  }
}

/**
 * A fire was not claimed because the runner's lease is close to its local deadline (less than a
 * third of its TTL left: keepalives are failing). Reported through `onError`; another replica
 * with a healthy lease can claim the fire.
 */
export class LeaseAtRiskError extends CronError {
  /** Made by the scheduler where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The runner's lease. */
    readonly leaseId: bigint,
    /** The time the lease had left before its local deadline, in ms. */
    readonly remainingMs: number,
  ) {
    super(
      'LEASE_AT_RISK',
      `not claiming: lease ${leaseId.toString(16)} has ${Math.max(0, Math.round(remainingMs))} ms left before its local deadline (keepalives are failing)`,
    );
  }
}

/**
 * The reason on a run's `signal` under `overlap: 'replace'` when a later fire of its job was
 * claimed (on any replica): that run goes on instead. `by` is the replacing run's fire, runner
 * and token, when the running marker said.
 */
export class RunReplacedError extends CronError {
  /** Made by the scheduler where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The job whose run was replaced. */
    readonly job: string,
    /** The fire the replaced run was for. */
    readonly fireTime: Date,
    /** The replacing run, as far as its running marker said. */
    readonly by: {
      /** Its fire, as an ISO 8601 string. */
      fireTime?: string;
      /** The runner (replica) that claimed it. */
      runner?: string;
      /** Its fencing token. */
      token?: bigint;
    },
  ) {
    const who =
      by.fireTime === undefined
        ? 'a later run'
        : `the run of ${by.fireTime}${by.runner === undefined ? '' : ` on ${JSON.stringify(by.runner)}`}${by.token === undefined ? '' : ` (token ${by.token})`}`;
    super(
      'RUN_REPLACED',
      `the run of job ${JSON.stringify(job)} for the fire at ${fireTime.toISOString()} was replaced by ${who} (overlap: 'replace')`,
    );
  }
}

function hasCode(err: unknown, code?: CronErrorCode): boolean {
  if (typeof err !== 'object' || err === null || !(BRAND in err)) return false;
  return code === undefined || (err as Record<symbol, unknown>)[BRAND] === code;
}

/** Any error of `@leasehold/cron`: a {@link CronError}, also from another installed copy. */
export const isCronError = (err: unknown): err is CronError => hasCode(err);
/** Bad input to any leasehold package: cron's, core's or fence's `InvalidArgumentError`. */
export const isInvalidArgumentError = (err: unknown): err is InvalidArgumentError =>
  typeof err === 'object' && err !== null && INVALID_ARGUMENT_BRAND in err;
/** A {@link SchedulerStoppedError}. */
export const isSchedulerStoppedError = (err: unknown): err is SchedulerStoppedError =>
  hasCode(err, 'SCHEDULER_STOPPED');
/** A {@link MaxRunTimeError}. */
export const isMaxRunTimeError = (err: unknown): err is MaxRunTimeError =>
  hasCode(err, 'MAX_RUN_TIME');
/** A {@link LeaseAtRiskError}. */
export const isLeaseAtRiskError = (err: unknown): err is LeaseAtRiskError =>
  hasCode(err, 'LEASE_AT_RISK');
/** A {@link RunReplacedError}. */
export const isRunReplacedError = (err: unknown): err is RunReplacedError =>
  hasCode(err, 'RUN_REPLACED');
