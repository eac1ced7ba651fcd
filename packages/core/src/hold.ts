/**
 * What a held lock and a leadership share: a queue entry that is first, seen through a signal
 * that checks the session's deadline on every read, guarded writes, and one way to end it.
 */
import type { IKeyValue, IRequestOp } from 'etcd3';
import type { LockLostReason } from './errors.js';
import { withoutStack } from './latch.js';
import { fencedRequests } from './fenced-ops.js';
import type { Entry } from './queue.js';
import type { Session } from './session.js';
import { assertTimeLeft } from './time-left.js';

/** An etcd write made only while the hold is still first in its queue. */
export type FencedOp =
  | {
      /** Put `value` at `key`. */
      type: 'put';
      /**
       * The etcd key written: not inside a lock or election queue (a lease-less key there would
       * wedge it), nor named twice in one write.
       */
      key: string;
      /** The value; a string is written as UTF-8. */
      value: string | Uint8Array;
    }
  | {
      /** Delete `key`. */
      type: 'delete';
      /** The etcd key deleted: not inside a lock or election queue, nor named twice. */
      key: string;
    };

/**
 * A compare for your own etcd transactions: it holds while the key still has the create
 * revision it had when acquired (or elected). With etcd3:
 * `client.if(guard.key, 'Create', '==', guard.createRevision.toString())`.
 */
export interface LockGuard {
  /** The hold's etcd key. */
  key: string;
  /** The key's create revision when acquired (or elected): the hold's fencing token. */
  createRevision: bigint;
}

/** Who is first in a lock's or an election's queue. */
export interface Holder {
  /**
   * The holder's value: a lock's holder value, a leader's proclaimed value, decoded as UTF-8.
   * A value written by another tool that is not valid UTF-8 (Go or `etcdctl` may write any
   * bytes) decodes with U+FFFD in place of each bad sequence; `valueBytes` has it exactly.
   */
  value: string;
  /** The value's bytes exactly as etcd holds them. */
  valueBytes: Uint8Array;
  /** The fencing token: the key's create revision. */
  token: bigint;
  /** The etcd key, `<prefix><name>/<lease id hex>`. */
  key: string;
  /** The lease the key is attached to. */
  leaseId: bigint;
}

/** The first key of a queue as a {@link Holder}. */
export const toHolder = (kv: IKeyValue | undefined): Holder | undefined =>
  kv && {
    value: kv.value.toString(),
    // A copy: etcd3's Buffer is a view into memory shared with other keys' values.
    valueBytes: new Uint8Array(kv.value),
    token: BigInt(kv.create_revision),
    key: kv.key.toString(),
    leaseId: BigInt(kv.lease),
  };

/** Why a lock or a leadership ended, in words. */
export function lossWhy(reason: LockLostReason, cause?: unknown): string {
  const why: Record<LockLostReason, string> = {
    session: `its session was lost (${(cause as Error | undefined)?.message ?? 'unknown'})`,
    deleted: 'its key was deleted by someone else',
    overwritten: 'its key was written by someone else',
    'expired-in-queue':
      "it vanished while waiting: the session's lease expired or the key was deleted",
  };
  return why[reason];
}

export abstract class Hold<Lost extends Error, Ended extends Error> implements AsyncDisposable {
  readonly #entry: Entry;
  #ending: Promise<void> | undefined;
  /** The session the hold is on. */
  readonly session: Session;
  /** The etcd key that represents this hold. */
  readonly key: string;
  /** The fencing token: the key's create revision. */
  readonly token: bigint;

  /** @internal The key's value as the join found or wrote it. */
  protected get entryValue(): Buffer {
    return this.#entry.value;
  }

  protected constructor(entry: Entry) {
    this.#entry = entry;
    ({ session: this.session, key: this.key, token: this.token } = entry);
  }

  /**
   * Aborts when the hold ends: on session loss, when its key is deleted or written by anyone
   * else, and when its owner ends it. Reading its `aborted`, `reason` or `throwIfAborted()`
   * checks the session's deadline first, also on a signal kept from earlier.
   */
  get signal(): AbortSignal {
    // The entry's: one latch per hold, made when first read.
    return this.#entry.signal;
  }

  /** True until the hold is lost or ended by its owner. */
  get isHeld(): boolean {
    return this.#entry.endReason === undefined;
  }

  /** Throws the reason if the hold is lost or ended. */
  throwIfLost(): void {
    const reason = this.#entry.endReason;
    if (reason) throw reason;
  }

  /**
   * Milliseconds left before the session's local deadline, which bounds the hold; 0 once the
   * hold is lost or ended. Reading it checks the deadline, like every other read.
   */
  timeLeftMs(): number {
    return this.isHeld ? Math.max(0, this.session.timeLeftMs()) : 0;
  }

  /**
   * Returns the milliseconds left if at least `ms` are; otherwise throws
   * `InsufficientLeaseTimeError` (with the loss or end as its cause once the hold is gone), so a
   * critical section can refuse to start work that cannot finish inside the lease. `ms` must be
   * a non-negative, finite number (`InvalidArgumentError` otherwise).
   *
   * @example
   * ```ts
   * lock.assertTimeLeft(2_000); // throws unless at least 2 s of lease are left
   * await copyBatch(lock.token);
   * ```
   */
  assertTimeLeft(ms: number): number {
    const leftMs = this.timeLeftMs();
    const lost = this.#entry.endReason;
    return assertTimeLeft(ms, { leftMs, lost, what: `${this.key} (token ${this.token})` });
  }

  /** Calls `listener` once if the hold is lost (not when its owner ends it). */
  onLost(listener: (error: Lost) => void): Disposable {
    return this.#entry.onLost(listener as (error: Error) => void);
  }

  /** A compare for your own etcd transactions; see {@link LockGuard}. */
  get guard(): LockGuard {
    return { key: this.key, createRevision: this.token };
  }

  /**
   * Applies `ops` in one etcd transaction only if this hold still owns its key (same create
   * revision, still attached to this session's lease). Resolves to the revision of the write.
   * Rejects with the lost error (and marks the hold lost) if it does not, and with the ended
   * error once its owner ended it. Not retried: a write that timed out may have landed.
   *
   * Keys inside the client's lock or election queues are refused with {@link InvalidArgumentError}.
   *
   * @example
   * ```ts
   * await lock.fencedWrite([
   *   { type: 'put', key: '/jobs/42/state', value: 'done' },
   *   { type: 'delete', key: '/jobs/42/claim' },
   * ]);
   * ```
   */
  async fencedWrite(ops: readonly FencedOp[]): Promise<bigint> {
    const requests = fencedRequests(ops, this.#entry.reserved);
    const attributes = () => ({ ...this.#attributes(), 'leasehold.ops': requests.length });
    return this.session.telemetry.span('leasehold.fenced_write', attributes, async (annotate) => {
      this.throwIfLost();
      const revision = await this.#entry.txn('fenced write', requests);
      annotate({ 'leasehold.revision': revision.toString() });
      return revision;
    });
  }

  #attributes() {
    return {
      'leasehold.key': this.key,
      'leasehold.token': this.token.toString(),
      'leasehold.lease_id': this.session.leaseId.toString(16),
    };
  }

  /** Shorthand for a fenced write of one key. */
  put(key: string, value: string | Uint8Array): Promise<bigint> {
    return this.fencedWrite([{ type: 'put', key, value }]);
  }

  /** Shorthand for a fenced delete of one key. */
  delete(key: string): Promise<bigint> {
    return this.fencedWrite([{ type: 'delete', key }]);
  }

  /** @internal The entry's guarded txn, for the subclass's own writes to its key. */
  protected txn(what: string, ops: IRequestOp[]): Promise<bigint> {
    this.throwIfLost();
    return this.#entry.txn(what, ops);
  }

  /** The subclass's release or resign: `signal` aborts with `reason()`, then the key is removed. */
  protected end(what: 'release' | 'resign', reason: () => Ended): Promise<void> {
    const telemetry = this.session.telemetry;
    const span = what === 'release' ? 'leasehold.lock.release' : 'leasehold.election.resign';
    return (this.#ending ??= telemetry.span(
      span,
      () => this.#attributes(),
      async () => {
        if (this.#entry.end(what, () => withoutStack(reason)) && what === 'resign') {
          telemetry.leadership('resigned');
        }
        await this.#entry.remove(what);
      },
    ));
  }

  abstract [Symbol.asyncDispose](): Promise<void>;
}
