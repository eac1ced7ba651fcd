/**
 * Locks: etcd's Go `concurrency.Mutex`, key for key, on the queue primitive. The holder's create
 * revision is its fencing token; release is guarded by it.
 */
import type { IKeyValue } from 'etcd3';
import { anySignal, raceSignal, timeoutSignal, type Clock } from './clock.js';
import {
  EtcdUnavailableError,
  LockLostError,
  LockReleasedError,
  LockTakenError,
  LockTimeoutError,
} from './errors.js';
import { Hold, lossWhy } from './hold.js';
import {
  checkOptions,
  defaultHolderValue,
  encodeName,
  validateDurationMs,
  validateSignal,
  validateValue,
} from './options.js';
import type { Entry, LostError, Queue } from './queue.js';
import { assertSession, type Session } from './session.js';

/**
 * Options of `client.acquire(name, options)` (and of `acquireRead`/`acquireWrite`, `withLock`);
 * every field is optional.
 */
export interface AcquireOptions {
  /** Stop waiting when aborted; the promise rejects with `signal.reason`. */
  signal?: AbortSignal;
  /** Stop waiting after this many milliseconds with `LockTimeoutError`. Default: no timeout. */
  timeoutMs?: number;
  /** Hold the lock on this session instead of the client's shared one. */
  session?: Session;
  /**
   * Written on the lock key while waiting and holding, so others can see who holds it
   * (`LockTakenError`, `client.holder()`). At most 64 KiB of UTF-8. Default `hostname:pid`.
   */
  value?: string;
}

/**
 * Options of `client.tryAcquire(name, options)`: those of {@link AcquireOptions} but `timeoutMs`,
 * since it never waits.
 */
export type TryAcquireOptions = Omit<AcquireOptions, 'timeoutMs'>;

/** What `withLock` hands to its function. */
export interface LockContext {
  /** The fencing token: send it with every write to the protected resource. */
  token: bigint;
  /** Aborts when the lock can no longer be trusted (see {@link Lock.signal}). */
  signal: AbortSignal;
  /** The lock itself: for `timeLeftMs()`, `fencedWrite()`, `onLost()` and the rest. */
  lock: Lock;
}

/** What locking needs from the client that makes the lock. */
export interface LockMaker {
  readonly locks: Queue;
  readonly clock: Clock;
  sharedSession(signal?: AbortSignal): Promise<Session>;
}

export const lostError: LostError = (reason, entry, cause) => {
  const message = `lock ${entry.key} (token ${entry.token}) is lost: ${lossWhy(reason, cause)}`;
  return new LockLostError(reason, entry.key, entry.token, message, cause ? { cause } : undefined);
};

/** Waits for the lock `name` (FIFO) and returns it held. */
export function acquire(maker: LockMaker, name: string, options: AcquireOptions): Promise<Lock> {
  const span = 'leasehold.lock.acquire';
  return maker.locks.etcd.telemetry.acquisition('lock', span, name, options, async (joined) => {
    checkOptions(options, ['signal', 'timeoutMs', 'session', 'value']);
    const segment = encodeName(name);
    const value = holderValue(options);
    using timeout = waitDeadline(maker, options, (ms) => new LockTimeoutError(name, ms));
    const [session, signal] = await sessionFor(maker, options, timeout?.signal);
    const entry = await maker.locks.join(segment, session, { value, signal, lostError });
    joined(entry);
    await entry.waitFirst(signal);
    return Lock.held(entry, name);
  });
}

/** Takes the lock `name` only if it is free now; otherwise rejects with `LockTakenError`. */
export function tryAcquire(
  maker: LockMaker,
  name: string,
  options: TryAcquireOptions,
): Promise<Lock> {
  const span = 'leasehold.lock.try_acquire';
  return maker.locks.etcd.telemetry.acquisition('lock', span, name, options, async (joined) => {
    checkOptions(options, ['signal', 'session', 'value']);
    const segment = encodeName(name);
    const value = holderValue(options);
    // Only an earlier hold of this session, still being removed, can be ahead of us locally:
    // wait for that a bounded time, not for as long as someone holds the lock.
    const ms = maker.locks.etcd.options.callTimeoutMs;
    const why = `lock ${JSON.stringify(name)}: an earlier hold of it on this session was still being removed from etcd after ${ms} ms`;
    const [session, signal] = await sessionFor(maker, options, undefined);
    const key = `${maker.locks.range(segment)}${session.leaseId.toString(16)}`;
    const taken = (holder: IKeyValue | undefined) =>
      new LockTakenError(
        name,
        holder?.key.toString() ?? key,
        BigInt(holder?.create_revision ?? 0),
        holder?.value.toString() ?? '',
      );
    // This session holds it or already waits for it: report whoever is first right now.
    if (maker.locks.busy(key) !== undefined) {
      throw taken(await raceSignal(maker.locks.first(segment), signal));
    }
    using bound = timeoutSignal(maker.clock, ms, () => new EtcdUnavailableError(why));
    const entry = await maker.locks.join(segment, session, {
      value,
      signal,
      lostError,
      turnSignal: bound.signal,
      withHolder: true,
    });
    if (entry.isFirst) {
      joined(entry);
      return Lock.held(entry, name);
    }
    await raceSignal(entry.remove('withdraw'), signal); // one attempt; the rest in the background
    // The join names the holder with its value, unless a nested queue's key hid it from the read.
    throw taken(entry.holder ?? (await raceSignal(maker.locks.first(segment), signal)));
  });
}

/** The default holder value's bytes: one copy for every hold of the process (never written). */
let defaultValueBytes: Buffer | undefined;

export function holderValue(options: AcquireOptions): Buffer {
  if (options.value === undefined) return (defaultValueBytes ??= Buffer.from(defaultHolderValue()));
  return Buffer.from(validateValue('value', options.value));
}

/** The wait's deadline, if `options.timeoutMs` is given: it aborts with `error(ms)`. */
export function waitDeadline(
  maker: Pick<LockMaker, 'clock'>,
  options: { timeoutMs?: number | undefined },
  error: (ms: number) => Error,
): ({ signal: AbortSignal } & Disposable) | undefined {
  if (options.timeoutMs === undefined) return undefined;
  const ms = validateDurationMs('timeoutMs', options.timeoutMs);
  return timeoutSignal(maker.clock, ms, () => error(ms));
}

/** The session to hold on, and one signal for the wait: the caller's, the bound, the session. */
export async function sessionFor(
  maker: Pick<LockMaker, 'sharedSession'>,
  options: AcquireOptions,
  bound: AbortSignal | undefined,
): Promise<[Session, AbortSignal]> {
  const userSignal = validateSignal(options.signal);
  userSignal?.throwIfAborted();
  const given = options.session === undefined ? undefined : assertSession(options.session);
  const grantSignal = userSignal && bound ? anySignal(userSignal, bound) : (userSignal ?? bound);
  const session = given ?? (await maker.sharedSession(grantSignal));
  // Without a caller's signal or a timeout the session's signal is the whole story: combining
  // signals costs more than the rest of an uncontended acquire's local work.
  const waitSignal =
    userSignal || bound ? anySignal(userSignal, bound, session.signal) : session.signal;
  return [session, waitSignal];
}

/**
 * A held lock. `token` is the lock key's create revision: it only grows across holders of any
 * lock on the cluster, so a resource that keeps the highest token it has seen can refuse a
 * holder that lost the lock without knowing it.
 *
 * `signal` aborts with a {@link LockLostError} (`reason` `session`, `deleted` or `overwritten`)
 * when the lock is lost, and with {@link LockReleasedError} on release.
 */
export class Lock extends Hold<LockLostError, LockReleasedError> {
  protected constructor(
    entry: Entry,
    /** The lock's name as given to `acquire`. */
    readonly name: string,
  ) {
    super(entry);
  }

  /** The holder value written on the lock key. */
  get value(): string {
    return this.entryValue.toString();
  }

  /** @internal */
  static held(entry: Entry, name: string): Lock {
    return new Lock(entry, name);
  }

  /**
   * Releases the lock: its `signal` aborts at once, then its key is deleted only if it still has
   * this hold's create revision, so a late or repeated release never deletes a newer holder's
   * key. Idempotent. Resolves after the first attempt: if etcd cannot be reached the delete goes
   * on in the background until it succeeds or the session ends, and failures and refusals are
   * reported through `client.onCleanupError`, never thrown.
   */
  release(): Promise<void> {
    return this.end('release', () => new LockReleasedError(this.key, this.token));
  }

  /** {@link Lock.release}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
