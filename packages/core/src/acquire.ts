/**
 * How semaphores and read/write locks acquire: a lock's steps (a deadline, the session, the join,
 * the wait, clean-up on every way out) on the lock queue, with an admission rule of their own and
 * tagged keys, so that one session can hold several permits or read holds of one name at once.
 */
import type { IKeyValue } from 'etcd3';
import { raceSignal } from './clock.js';
import { LockTimeoutError } from './errors.js';
import {
  holderValue,
  lostError,
  sessionFor,
  waitDeadline,
  type AcquireOptions,
  type Lock,
  type LockMaker,
} from './mutex.js';
import { checkOptions } from './options.js';
import type { Admission, Entry } from './queue.js';

/** What a kind of hold asks of the lock queue, worked out from the call's arguments. */
export interface Queued<H> {
  /** The name as given, for errors and telemetry. */
  name: string;
  /** The queue: an encoded name with its kind's suffix (`%sem`, `%rw`). */
  segment: string;
  /** The key's tag (see `Queue.join`). */
  tag: string;
  /** What errors call it: `semaphore "x"…`, `read/write lock "x"…` (default `lock "x"`). */
  what?: string;
  admission: Admission;
  /** What `tryAcquire…` rejects with when the hold is not free now. */
  taken(holder: IKeyValue | undefined): Error;
  /** Makes the hold of an admitted entry, within the wait's deadline (a permit claims its slot). */
  hold(entry: Entry, signal: AbortSignal): Promise<H>;
  /** Called once the acquisition is over, however it ended. */
  done?(): void;
}

/**
 * Acquires a hold described by `describe()` (called inside, so bad input rejects like every other
 * failure, before any I/O). `wait`: FIFO until admitted, else only if admitted at once. Options
 * besides the lock's (`permits`) are named in `extra`.
 */
export function acquireQueued<H extends Lock>(
  maker: LockMaker,
  kind: 'semaphore' | 'rwlock',
  name: string,
  options: AcquireOptions,
  wait: boolean,
  extra: readonly string[],
  describe: () => Queued<H>,
): Promise<H> {
  const span = `leasehold.${kind}.${wait ? 'acquire' : 'try_acquire'}`;
  return maker.locks.etcd.telemetry.acquisition(kind, span, name, options, async (joined) => {
    const allowed = ['signal', 'session', 'value', ...(wait ? ['timeoutMs'] : []), ...extra];
    checkOptions(options, allowed as (keyof AcquireOptions)[]);
    const queued = describe();
    try {
      const value = holderValue(options);
      const timedOut = (ms: number) => new LockTimeoutError(name, ms, queued.what);
      using timeout = waitDeadline(maker, options, timedOut);
      const [session, signal] = await sessionFor(maker, options, timeout?.signal);
      const entry = await maker.locks.join(queued.segment, session, {
        value,
        signal,
        lostError,
        tag: queued.tag,
        admission: queued.admission,
        withHolder: !wait,
      });
      if (!wait && !entry.isFirst) {
        await raceSignal(entry.remove('withdraw'), signal); // one attempt; the rest in the background
        throw queued.taken(entry.holder);
      }
      joined(entry);
      if (wait) await entry.waitFirst(signal);
      try {
        return await queued.hold(entry, signal);
      } catch (err) {
        void entry.remove('withdraw').catch(() => undefined);
        throw err;
      }
    } finally {
      queued.done?.();
    }
  });
}
