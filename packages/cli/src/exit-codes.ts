/**
 * Every exit code of `leasehold`, and how errors map onto them. The README's "Exit codes" table
 * is this file in prose; a test checks that the two agree.
 *
 * `run` and `elect` pass the command's own code through (0–255, or 128+N when a signal ended
 * it), so leasehold's outcomes use codes that commands rarely choose: sysexits.h's 64–78 for
 * what that header names (usage, unavailable, software, permission), 80–84 for the outcomes of
 * a lock, and the shell's 126/127 for a command that could not be started.
 */
import { constants } from 'node:os';
import {
  InvalidArgumentError,
  isAuthError,
  isClusterChangedError,
  isConnectError,
  isEtcdRequestError,
  isEtcdUnavailableError,
  isInvalidArgumentError,
  isLeaseLostError,
  isLeadershipLostError,
  isLockLostError,
  isLockTakenError,
  isLockTimeoutError,
  isCampaignTimeoutError,
} from '@leasehold/core';

/**
 * Every exit code leasehold ends with, by name; a command run under `run` or `elect` passes its
 * own through, and one ended by a signal gives {@link signalExitCode}.
 *
 * @example
 * ```ts
 * import { exitCodes, main } from '@leasehold/cli';
 *
 * const argv = ['node', 'leasehold', 'run', '--lock', 'nightly', '--no-wait', '--', './job.sh'];
 * const code = await main(argv, { stdout: process.stdout, stderr: process.stderr });
 * if (code === exitCodes.taken) console.log('another host runs it');
 * ```
 */
export const exitCodes = {
  /** The command (or leasehold's own work) succeeded. */
  ok: 0,
  /** `unlock`: the operator answered "no" at the prompt; nothing was removed. */
  declined: 1,
  /** Bad flags, arguments or values; an unreadable TLS or password file (sysexits EX_USAGE). */
  usage: 64,
  /**
   * etcd could not be reached in time (connect, or a call past its deadline), the session was
   * lost before the lock or leadership was won, or etcd answered as a different cluster
   * (sysexits EX_UNAVAILABLE).
   */
  unavailable: 69,
  /** Anything unexpected: a bug. `--debug` prints the stack (sysexits EX_SOFTWARE). */
  internal: 70,
  /** etcd refused: wrong credentials, no permission on the prefix (sysexits EX_NOPERM). */
  refused: 77,
  /** `run --no-wait`: someone else holds the lock. */
  taken: 80,
  /** `run` / `elect --wait-timeout`: not acquired (elected) within the time given. */
  timeout: 81,
  /** The lock or leadership was lost while the command ran; the command was stopped. */
  lost: 82,
  /** `unlock`: no such key, or it changed since it was read; nothing was removed. */
  notFound: 83,
  /**
   * `run` / `elect`: the keeper process was killed from outside (kill -9, the OOM killer) while
   * the command ran; leasehold killed the command's process group (SIGKILL).
   */
  keeperGone: 84,
  /** The command could not be executed (not executable, as in the shell). */
  cannotExecute: 126,
  /** The command was not found (as in the shell). */
  commandNotFound: 127,
} as const;

/**
 * The code for a process ended by `signal`, or for leasehold interrupted by it: 128 + N.
 *
 * @throws `InvalidArgumentError` (core's) for a name Node does not know or a number outside
 *   1–127.
 *
 * @example
 * ```ts
 * signalExitCode('SIGTERM'); // 143
 * signalExitCode(9); // 137
 * ```
 */
export function signalExitCode(signal: NodeJS.Signals | number): number {
  if (typeof signal === 'number' && Number.isInteger(signal) && signal >= 1 && signal <= 127) {
    return 128 + signal;
  }
  const number = typeof signal === 'string' ? constants.signals[signal] : undefined;
  if (number === undefined) {
    throw invalidArgument(
      `signal must be a signal name such as "SIGTERM" or a number from 1 to 127, got ${typeof signal === 'string' ? JSON.stringify(signal) : String(signal)}`,
    );
  }
  return 128 + number;
}

/**
 * Core's `InvalidArgumentError`, typed as the `Error` it is (core's declaration of its error
 * classes does not show them as `Error` subclasses to type-aware lint rules).
 */
export function invalidArgument(message: string): Error {
  return new InvalidArgumentError(message);
}

/**
 * An error that leasehold reports as one line with a chosen exit code. `message` is what the
 * operator reads: what went wrong and, where it helps, what to do.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
    options?: { cause?: unknown; silent?: boolean; keepLease?: boolean },
  ) {
    super(message, options);
    this.name = 'CliError';
    this.silent = options?.silent === true;
    this.keepLease = options?.keepLease === true;
  }

  /** Nothing to print: the exit code says it all (Ctrl-C ending `observe`). */
  readonly silent: boolean;

  /**
   * Do not release the hold or revoke the lease: part of the command may still run, so the
   * lock must pass on only when the lease expires (leasehold exits without renewing it).
   */
  readonly keepLease: boolean;
}

/** Shorthand for a usage error (64). */
export const usageError = (message: string, options?: { cause?: unknown }) =>
  new CliError(message, exitCodes.usage, options);

/** The exit code for any error that reached the top. */
export function exitCodeFor(err: unknown): number {
  if (err instanceof CliError) return err.exitCode;
  if (isInvalidArgumentError(err)) return exitCodes.usage;
  if (isLockTakenError(err)) return exitCodes.taken;
  if (isLockTimeoutError(err) || isCampaignTimeoutError(err)) return exitCodes.timeout;
  if (isLockLostError(err) || isLeadershipLostError(err)) {
    // Lost while waiting in the queue (the key expired): as unreachable as a lost session.
    return err.reason === 'expired-in-queue' ? exitCodes.unavailable : exitCodes.lost;
  }
  if (isAuthError(err) || isEtcdRequestError(err)) return exitCodes.refused;
  if (
    isConnectError(err) ||
    isEtcdUnavailableError(err) ||
    isClusterChangedError(err) ||
    isLeaseLostError(err)
  ) {
    return exitCodes.unavailable;
  }
  return exitCodes.internal;
}
