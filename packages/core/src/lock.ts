import type { IRangeResponse } from 'etcd3';
import {
  InvalidArgumentError,
  LockLostError,
  LockReleasedError,
  isLeaseholdError,
} from './errors.js';
import type { EtcdTransport } from './etcd.js';
import type { KeyWatch } from './key-watch.js';
import { LossLatch } from './latch.js';
import { describe } from './options.js';
import type { Session } from './session.js';

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
 * A compare for your own etcd transactions: it holds while the lock key still has the
 * create revision it had when acquired. With etcd3:
 * `client.if(guard.key, 'Create', '==', guard.createRevision.toString())`.
 */
export interface LockGuard {
  key: string;
  createRevision: bigint;
}

const RECHECK_DELAY_MS = 250;

/**
 * A held lock. `token` is the lock key's create revision: it only grows across holders of any
 * lock on the cluster, so a resource that keeps the highest token it has seen can refuse a
 * holder that lost the lock without knowing it.
 */
export class Lock implements AsyncDisposable {
  readonly #latch = new LossLatch<LockLostError | LockReleasedError>();
  readonly #lost = new LossLatch<LockLostError>();
  #watch: Disposable | undefined;
  #releasing: Promise<void> | undefined;
  #cleanup: Promise<void> | undefined;
  #exitLocal: () => void = () => undefined;

  private constructor(
    private readonly transport: EtcdTransport,
    /** The session the lock is held on. */
    readonly session: Session,
    /** The lock's name as given to `acquire`. */
    readonly name: string,
    /** The etcd key that represents this hold. */
    readonly key: string,
    /** The fencing token: the key's create revision. */
    readonly token: bigint,
  ) {}

  /** @internal */
  static held(
    transport: EtcdTransport,
    session: Session,
    name: string,
    key: string,
    token: bigint,
    seenAtRevision: bigint,
    keyWatch: KeyWatch,
    exitLocal: () => void,
  ): Lock {
    const lock = new Lock(transport, session, name, key, token);
    lock.#exitLocal = exitLocal;
    const sub = session.onLost((cause) => void lock.#lose('session', cause));
    lock.#latch.on(() => sub[Symbol.dispose]());
    // Nothing may change the key after the revision the acquire saw it at.
    lock.#watch = keyWatch.register(key, seenAtRevision + 1n, {
      changed: (kind) => void lock.#lose(kind === 'delete' ? 'deleted' : 'overwritten'),
      unsure: () => void lock.#recheck(),
    });
    return lock;
  }

  /**
   * Aborts when the lock ends: on session loss, when its key is deleted or written by anyone
   * else (reason {@link LockLostError} with `reason` `session`, `deleted` or `overwritten`), and
   * on release ({@link LockReleasedError}).
   */
  get signal(): AbortSignal {
    return this.#latch.signal;
  }

  /** True until the lock is lost or released. */
  get isHeld(): boolean {
    return !this.#latch.signal.aborted;
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
    const requests = validateOps(ops);
    this.#throwIfEnded();
    const key = Buffer.from(this.key);
    const res = await this.transport.call(
      'fenced write',
      (o) =>
        this.transport.client.kv.txn(
          {
            compare: [
              { key, target: 'Create', result: 'Equal', create_revision: this.token.toString() },
              { key, target: 'Lease', result: 'Equal', lease: this.session.leaseId.toString() },
            ],
            success: requests,
            failure: [{ request_range: { key } }],
          },
          o,
        ),
      { idempotent: false },
    );
    if (!res.succeeded) {
      const current = res.responses[0]?.response_range.kvs[0];
      const lost = this.#lose(current ? 'overwritten' : 'deleted');
      throw this.#latch.reason ?? lost;
    }
    return BigInt(res.header.revision);
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
   * Releases the lock: deletes its key only if it still has this hold's create revision, so a
   * late or repeated release never deletes a newer holder's key. Idempotent; after loss it
   * only cleans up.
   */
  release(): Promise<void> {
    this.#releasing ??= (async () => {
      this.#latch.trip(new LockReleasedError(this.key, this.token));
      await this.#end();
    })();
    return this.#releasing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  #throwIfEnded(): void {
    const reason = this.#latch.reason;
    if (reason) throw reason;
  }

  #lose(reason: 'session' | 'deleted' | 'overwritten', cause?: unknown): LockLostError {
    const messages = {
      session: `its session was lost (${(cause as Error | undefined)?.message ?? 'unknown'})`,
      deleted: 'its key was deleted by someone else',
      overwritten: 'its key was written by someone else',
    };
    const error = new LockLostError(
      reason,
      this.key,
      this.token,
      `lock ${this.key} (token ${this.token}) is lost: ${messages[reason]}`,
      cause === undefined ? undefined : { cause },
    );
    if (this.#latch.trip(error)) {
      this.#lost.trip(error);
      void this.#end().catch(() => undefined);
    }
    return error;
  }

  /**
   * Removes this hold's key (guarded by its create revision) and lets the next local waiter
   * in. The next in-process holder must not find this key still there, or it would adopt it and
   * reuse this hold's token; so on failure it keeps trying until the session ends.
   */
  #end(): Promise<void> {
    this.#cleanup ??= (async () => {
      this.#watch?.[Symbol.dispose]();
      try {
        await this.#deleteOwnKey();
        this.#exitLocal();
      } catch (err) {
        void this.#retryDeleteUntilSessionEnds().finally(() => this.#exitLocal());
        throw err;
      }
    })();
    return this.#cleanup;
  }

  async #deleteOwnKey(): Promise<void> {
    if (this.session.isLost) return;
    const key = Buffer.from(this.key);
    await this.transport.call(
      'lock release',
      (o) =>
        this.transport.client.kv.txn(
          {
            compare: [
              { key, target: 'Create', result: 'Equal', create_revision: this.token.toString() },
            ],
            success: [{ request_delete_range: { key } }],
            failure: [],
          },
          o,
        ),
      { idempotent: true },
    );
  }

  async #retryDeleteUntilSessionEnds(): Promise<void> {
    while (!this.session.isLost) {
      await new Promise((resolve) => setTimeout(resolve, RECHECK_DELAY_MS).unref());
      try {
        return await this.#deleteOwnKey();
      } catch {
        // keep trying; the session's own deadline ends this loop
      }
    }
  }

  #recheckLater(): void {
    setTimeout(() => void this.#recheck(), RECHECK_DELAY_MS).unref();
  }

  async #recheck(): Promise<void> {
    if (!this.isHeld) return;
    let res: IRangeResponse;
    try {
      res = await this.transport.call(
        'lock check',
        (o) => this.transport.client.kv.range({ key: Buffer.from(this.key) }, o),
        { idempotent: true },
      );
    } catch (err) {
      if (!isLeaseholdError(err) || err.code !== 'ETCD_REQUEST_FAILED') this.#recheckLater();
      return;
    }
    const kv = res.kvs[0];
    if (!kv || BigInt(kv.create_revision) !== this.token) return void this.#lose('deleted');
    if (kv.lease !== this.session.leaseId.toString()) return void this.#lose('overwritten');
  }
}

function validateOps(ops: unknown) {
  if (!Array.isArray(ops) || ops.length === 0) {
    throw new InvalidArgumentError(
      `ops must be a non-empty array of fenced operations, got ${describe(ops)}`,
    );
  }
  return ops.map((op: unknown, i) => {
    const o = op as Partial<{ type: unknown; key: unknown; value: unknown }>;
    if (typeof o?.key !== 'string' || o.key === '') {
      throw new InvalidArgumentError(
        `ops[${i}].key must be a non-empty string, got ${describe(o?.key)}`,
      );
    }
    const key = Buffer.from(o.key);
    if (o.type === 'delete') return { request_delete_range: { key } };
    if (o.type === 'put') {
      if (typeof o.value !== 'string' && !(o.value instanceof Uint8Array)) {
        throw new InvalidArgumentError(
          `ops[${i}].value must be a string or Uint8Array, got ${describe(o.value)}`,
        );
      }
      return { request_put: { key, value: Buffer.from(o.value) } };
    }
    throw new InvalidArgumentError(
      `ops[${i}].type must be "put" or "delete", got ${describe(o.type)}`,
    );
  });
}
