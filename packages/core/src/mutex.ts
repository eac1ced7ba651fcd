/**
 * Locks: etcd's Go `concurrency.Mutex`, key for key, on the queue primitive. The holder's create
 * revision is its fencing token; release is guarded by it.
 */
import type { IRequestOp } from 'etcd3';
import { anySignal, raceSignal, timeoutSignal, type Clock } from './clock.js';
import {
  EtcdUnavailableError,
  LockLostError,
  LockReleasedError,
  LockTakenError,
  LockTimeoutError,
  type LockLostReason,
} from './errors.js';
import { LossLatch } from './latch.js';
import { encodeName, invalid, validateDurationMs, validateSignal } from './options.js';
import type { Entry, LostError, Queue } from './queue.js';
import { assertSession, type Session } from './session.js';

export interface AcquireOptions {
  /** Stop waiting when aborted; the promise rejects with `signal.reason`. */
  signal?: AbortSignal;
  /** Stop waiting after this many milliseconds with `LockTimeoutError`. Default: no timeout. */
  timeoutMs?: number;
  /** Hold the lock on this session instead of the client's shared one. */
  session?: Session;
}

export type TryAcquireOptions = Omit<AcquireOptions, 'timeoutMs'>;

/** What `withLock` hands to its function. */
export interface LockContext {
  /** The fencing token: send it with every write to the protected resource. */
  token: bigint;
  /** Aborts when the lock can no longer be trusted (see {@link Lock.signal}). */
  signal: AbortSignal;
  lock: Lock;
}

/** An etcd write made only while the lock is still held. */
export type FencedOp =
  { type: 'put'; key: string; value: string | Uint8Array } | { type: 'delete'; key: string };

/**
 * A compare for your own etcd transactions: it holds while the lock key still has the create
 * revision it had when acquired. With etcd3:
 * `client.if(guard.key, 'Create', '==', guard.createRevision.toString())`.
 */
export interface LockGuard {
  key: string;
  createRevision: bigint;
}

/** What locking needs from the client that makes the lock. */
export interface LockMaker {
  readonly locks: Queue;
  readonly clock: Clock;
  sharedSession(signal?: AbortSignal): Promise<Session>;
}

const lostError: LostError = (reason, entry, cause) => {
  const why: Record<LockLostReason, string> = {
    session: `its session was lost (${(cause as Error | undefined)?.message ?? 'unknown'})`,
    deleted: 'its key was deleted by someone else',
    overwritten: 'its key was written by someone else',
    'expired-in-queue':
      "it vanished while waiting: the session's lease expired or the key was deleted",
  };
  const message = `lock ${entry.key} (token ${entry.token}) is lost: ${why[reason]}`;
  return new LockLostError(reason, entry.key, entry.token, message, cause ? { cause } : undefined);
};

/** Waits for the lock `name` (FIFO) and returns it held. */
export async function acquire(
  maker: LockMaker,
  name: string,
  options: AcquireOptions,
): Promise<Lock> {
  const { timeoutMs } = checkOptions(options);
  const segment = encodeName(name);
  const ms = timeoutMs === undefined ? undefined : validateDurationMs('timeoutMs', timeoutMs);
  using timeout =
    ms === undefined
      ? undefined
      : timeoutSignal(maker.clock, ms, () => new LockTimeoutError(name, ms));
  const [session, signal] = await sessionFor(maker, options, timeout?.signal);
  const entry = await maker.locks.join(segment, session, { value: EMPTY, signal, lostError });
  await entry.waitFirst(signal);
  return Lock.held(entry, name);
}

/** Takes the lock `name` only if it is free now; otherwise rejects with `LockTakenError`. */
export async function tryAcquire(
  maker: LockMaker,
  name: string,
  options: TryAcquireOptions,
): Promise<Lock> {
  checkOptions(options);
  const segment = encodeName(name);
  // Only an earlier hold of this session, still being removed, can be ahead of us locally:
  // wait for that a bounded time, not for as long as someone holds the lock.
  const ms = maker.locks.etcd.options.callTimeoutMs;
  const why = `lock ${JSON.stringify(name)}: an earlier hold of it on this session was still being removed from etcd after ${ms} ms`;
  const [session, signal] = await sessionFor(maker, options, undefined);
  const key = `${maker.locks.range(segment)}${session.leaseId.toString(16)}`;
  if (session.busy(key) !== undefined) {
    // This session holds it or already waits for it: report whoever is first right now.
    const first = await raceSignal(maker.locks.first(segment), signal);
    throw new LockTakenError(
      name,
      first?.key.toString() ?? key,
      BigInt(first?.create_revision ?? 0),
    );
  }
  using bound = timeoutSignal(maker.clock, ms, () => new EtcdUnavailableError(why));
  const turnSignal = bound.signal;
  const entry = await maker.locks.join(segment, session, {
    value: EMPTY,
    signal,
    lostError,
    turnSignal,
  });
  if (entry.isFirst) return Lock.held(entry, name);
  const holder = entry.holder!;
  await raceSignal(entry.remove('withdraw'), signal); // one attempt; the rest in the background
  throw new LockTakenError(name, holder.key.toString(), BigInt(holder.create_revision));
}

const EMPTY = Buffer.alloc(0);

function checkOptions(options: AcquireOptions): AcquireOptions {
  if (typeof options === 'object' && options !== null) return options;
  throw invalid('options', 'an object', options);
}

/** The session to hold on, and one signal for the wait: the caller's, the bound, the session. */
async function sessionFor(
  maker: LockMaker,
  options: AcquireOptions,
  bound: AbortSignal | undefined,
): Promise<[Session, AbortSignal]> {
  const userSignal = validateSignal(options.signal);
  userSignal?.throwIfAborted();
  const given = options.session === undefined ? undefined : assertSession(options.session);
  const session = given ?? (await maker.sharedSession(anySignal(userSignal, bound)));
  return [session, anySignal(userSignal, bound, session.signal)];
}

/**
 * A held lock. `token` is the lock key's create revision: it only grows across holders of any
 * lock on the cluster, so a resource that keeps the highest token it has seen can refuse a
 * holder that lost the lock without knowing it.
 */
export class Lock implements AsyncDisposable {
  readonly #entry: Entry;
  // Reading the session's signal trips it (and, through the entry, this lock) past its deadline.
  readonly #latch = new LossLatch<LockLostError | LockReleasedError>(() => this.session.isLost);
  readonly #lost = new LossLatch<LockLostError>();
  #releasing: Promise<void> | undefined;
  /** The session the lock is held on. */
  readonly session: Session;
  /** The etcd key that represents this hold. */
  readonly key: string;
  /** The fencing token: the key's create revision. */
  readonly token: bigint;

  private constructor(
    entry: Entry,
    /** The lock's name as given to `acquire`. */
    readonly name: string,
  ) {
    this.#entry = entry;
    ({ session: this.session, key: this.key, token: this.token } = entry);
  }

  /** @internal */
  static held(entry: Entry, name: string): Lock {
    const lock = new Lock(entry, name);
    const onEnd = () => {
      const reason = entry.signal.reason as LockLostError;
      if (lock.#latch.trip(reason)) lock.#lost.trip(reason);
    };
    if (entry.signal.aborted) onEnd();
    else entry.signal.addEventListener('abort', onEnd, { once: true });
    return lock;
  }

  /**
   * Aborts when the lock ends: on session loss, when its key is deleted or written by anyone
   * else (a {@link LockLostError} with `reason` `session`, `deleted` or `overwritten`), and on
   * release ({@link LockReleasedError}). Reading its `aborted`, `reason` or `throwIfAborted()`
   * checks the session's deadline first, also on a signal kept from earlier (`withLock`'s).
   */
  get signal(): AbortSignal {
    return this.#latch.signal;
  }

  /** True until the lock is lost or released. */
  get isHeld(): boolean {
    return !this.signal.aborted;
  }

  /** Throws the reason if the lock is lost or released. */
  throwIfLost(): void {
    this.signal.throwIfAborted();
  }

  /** Calls `listener` once if the lock is lost (not on release). */
  onLost(listener: (error: LockLostError) => void): Disposable {
    return this.#lost.on(listener);
  }

  /** A compare for your own etcd transactions; see {@link LockGuard}. */
  get guard(): LockGuard {
    return { key: this.key, createRevision: this.token };
  }

  /**
   * Applies `ops` in one etcd transaction only if this hold still owns its key (same create
   * revision, still attached to this session's lease). Resolves to the revision of the write.
   * Rejects with {@link LockLostError} (and marks the lock lost) if it does not, and with
   * {@link LockReleasedError} after release. Not retried: a write that timed out may have landed.
   */
  async fencedWrite(ops: readonly FencedOp[]): Promise<bigint> {
    const requests = toRequests(ops);
    this.throwIfLost();
    return this.#entry.txn('fenced write', requests);
  }

  /** Shorthand for a fenced write of one key. */
  put(key: string, value: string | Uint8Array): Promise<bigint> {
    return this.fencedWrite([{ type: 'put', key, value }]);
  }

  /** Shorthand for a fenced delete of one key. */
  delete(key: string): Promise<bigint> {
    return this.fencedWrite([{ type: 'delete', key }]);
  }

  /**
   * Releases the lock: its `signal` aborts at once, then its key is deleted only if it still has
   * this hold's create revision, so a late or repeated release never deletes a newer holder's
   * key. Idempotent. Resolves after the first attempt: if etcd cannot be reached the delete goes
   * on in the background until it succeeds or the session ends, and failures and refusals are
   * reported through `client.onCleanupError`, never thrown.
   */
  release(): Promise<void> {
    this.#releasing ??= (async () => {
      this.#latch.trip(new LockReleasedError(this.key, this.token));
      await this.#entry.remove('release');
    })();
    return this.#releasing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

function toRequests(ops: unknown): IRequestOp[] {
  if (!Array.isArray(ops) || ops.length === 0) {
    throw invalid('ops', 'a non-empty array of fenced operations', ops);
  }
  return ops.map((op: unknown, i) => {
    const o = (op ?? {}) as Partial<{ type: unknown; key: unknown; value: unknown }>;
    if (typeof o.key !== 'string' || o.key === '') {
      throw invalid(`ops[${i}].key`, 'a non-empty string', o.key);
    }
    const key = Buffer.from(o.key);
    if (o.type === 'delete') return { request_delete_range: { key } };
    if (o.type !== 'put') throw invalid(`ops[${i}].type`, '"put" or "delete"', o.type);
    if (typeof o.value !== 'string' && !(o.value instanceof Uint8Array)) {
      throw invalid(`ops[${i}].value`, 'a string or Uint8Array', o.value);
    }
    return { request_put: { key, value: Buffer.from(o.value) } };
  });
}
