import { raceSignal, type Clock } from './clock.js';
import { ClientClosedError, type LeaseholdError, type LeaseLostError } from './errors.js';
import { Etcd } from './transport/etcd.js';
import { Listeners } from './latch.js';
import { campaign, type CampaignOptions, type Leadership } from './election.js';
import { toHolder, type Holder } from './hold.js';
import { lead, type LeaderWork, type LeadOptions } from './lead.js';
import {
  acquire,
  tryAcquire,
  type AcquireOptions,
  type Lock,
  type LockContext,
  type TryAcquireOptions,
} from './mutex.js';
import { defaults, encodeName, checkOptions, invalid, tunables } from './options.js';
import { Observer, type LeaderState, type ObserveOptions } from './observe.js';
import { tidyNow } from './permit-slots.js';
import { Queue } from './queue.js';
import { acquireMode, tryAcquireMode } from './rwlock.js';
import {
  acquirePermit,
  semaphoreState,
  tryAcquirePermit,
  type Permit,
  type PermitContext,
  type PermitOptions,
  type SemaphoreState,
  type TryPermitOptions,
} from './semaphore.js';
import { Session, type SessionOptions } from './session.js';
import { Watch } from './watch.js';
import { errField } from './logger.js';
import { endpointOf } from './transport/members.js';
import { StallMonitor, type StallEvent } from './stall.js';

const lockContext = (lock: Lock): LockContext => ({ token: lock.token, signal: lock.signal, lock });

/** A connection to one etcd cluster. Sessions, locks and elections are made from it. */
export class Leasehold implements AsyncDisposable {
  /** @internal */
  readonly etcd: Etcd;
  /** @internal */
  readonly clock: Clock;
  /** @internal The lock queues, on one watch over the lock prefix. */
  readonly locks: Queue;
  /** @internal The election queues, on one watch over the election prefix. */
  readonly elections: Queue;
  /** Key prefix of this client's locks. */
  readonly lockPrefix: string;
  /** Key prefix of this client's elections. */
  readonly electionPrefix: string;
  readonly #watches: Watch[] = [];
  readonly #sharedOptions: Omit<SessionOptions, 'signal'>;
  /** Live sessions by lease id (decimal). */
  readonly #sessions = new Map<string, Session>();
  readonly #cleanupErrors = new Listeners<LeaseholdError>();
  readonly #stalls = new Listeners<StallEvent>();
  readonly #stallMonitor: StallMonitor<Session>;
  readonly #unobserve: () => void;
  /** Aborts on close: ends observers. */
  readonly #closed = new AbortController();
  #shared: Session | undefined;
  #sharedPending: Promise<Session> | undefined;
  #closing: Promise<void> | undefined;
  #electionsUsed = false;

  /** @internal Use {@link connect}. */
  constructor(
    etcd: Etcd,
    clock: Clock,
    prefixes: { lockPrefix: string; electionPrefix: string },
    recheckIntervalMs: number,
    sharedOptions: Omit<SessionOptions, 'signal'>,
    stallThresholdMs: number = defaults.stallThresholdMs,
  ) {
    this.etcd = etcd;
    const telemetry = etcd.telemetry;
    this.#unobserve = telemetry.observeSessions(() => this.#sessions.values());
    this.#stallMonitor = new StallMonitor(
      clock,
      stallThresholdMs,
      tunables.stallCheckIntervalMs,
      () => this.#sessions.values(),
      (stalledMs, sessions) => this.#stalled(stalledMs, sessions),
    );
    etcd.onChanged((err) =>
      telemetry.log.error({ err: errField(err) }, 'etcd cluster changed: every session ends'),
    );
    this.clock = clock;
    this.lockPrefix = prefixes.lockPrefix;
    this.electionPrefix = prefixes.electionPrefix;
    this.#sharedOptions = sharedOptions;
    // A queue's watch checks while any session lives, which may own keys in it by then (for
    // elections: once this client has campaigned).
    const live = () => this.#sessions.size > 0;
    this.locks = this.#queue('lock', this.lockPrefix, recheckIntervalMs, live);
    this.elections = this.#queue(
      'election',
      this.electionPrefix,
      recheckIntervalMs,
      () => this.#electionsUsed && live(),
    );
  }

  #queue(noun: string, prefix: string, recheckIntervalMs: number, active: () => boolean): Queue {
    const watch = new Watch(this.etcd, this.clock, prefix, recheckIntervalMs, active);
    this.#watches.push(watch);
    const sessionOf = (leaseId: string) => this.#sessions.get(leaseId);
    const report = (e: LeaseholdError) => this.#report(e);
    const reserved = [this.lockPrefix, this.electionPrefix];
    const queue = new Queue(this.etcd, watch, this.clock, report, noun, sessionOf, reserved);
    watch.onRead(({ kvs }) => queue.sweep(kvs));
    // A key created for no entry (a join that landed late) goes as soon as its event arrives.
    watch.onEvent(({ kind, kv }) => {
      if (kind === 'put' && kv.create_revision === kv.mod_revision) queue.sweep([kv]);
    });
    return queue;
  }

  /** @internal Aborts when the client is closed. */
  get closed(): AbortSignal {
    return this.#closed.signal;
  }

  /** The etcd cluster id recorded on first contact (decimal). */
  get clusterId(): string {
    return this.etcd.clusterId;
  }

  /**
   * Grants a new lease and keeps it alive until closed or lost.
   *
   * @throws {@link InvalidArgumentError} for an option out of range (see {@link SessionOptions}).
   *
   * @example
   * ```ts
   * await using session = await client.session({ ttlSeconds: 30 });
   * await using lock = await client.acquire('reports/daily', { session });
   * ```
   */
  async session(options?: SessionOptions): Promise<Session> {
    this.etcd.assertUsable();
    const session = await Session.create(this.etcd, this.clock, (e) => this.#report(e), options);
    if (this.#closing) {
      await session.close();
      throw new ClientClosedError();
    }
    const id = session.leaseId.toString();
    this.#sessions.set(id, session);
    this.#stallMonitor.start();
    session.signal.addEventListener(
      'abort',
      // The stall monitor idles by itself on its next tick without sessions: a session lost to
      // a stall must still be reported by the late tick that measures the stall.
      () => this.#sessions.delete(id),
      { once: true },
    );
    for (const watch of this.#watches) watch.wake();
    return session;
  }

  /**
   * The session locks use when none is given: one lease and one keepalive stream for every hold
   * in the process. After it is lost, the next call grants one fresh lease, however many calls
   * ask at once. `signal` only stops this caller's wait; the grant goes on for the others.
   */
  async sharedSession(signal?: AbortSignal): Promise<Session> {
    this.etcd.assertUsable();
    const current = this.#shared;
    if (current && !current.isLost) return Promise.resolve(current);
    this.#sharedPending ??= this.session(this.#sharedOptions)
      .then((session) => (this.#shared = session))
      .finally(() => (this.#sharedPending = undefined));
    return signal ? raceSignal(this.#sharedPending, signal) : this.#sharedPending;
  }

  /**
   * Waits for the lock `name` and returns it held. Waiting is FIFO. Rejects with `signal.reason`
   * on abort, with `LockTimeoutError` after `timeoutMs`, with the session's `LeaseLostError` if
   * it is lost while waiting; the waiter's key is then removed.
   *
   * Bad input (a name that is empty, longer than {@link MAX_NAME_LENGTH} or has NUL; an option out
   * of range) rejects with {@link InvalidArgumentError} naming it.
   *
   * @example
   * ```ts
   * await using lock = await client.acquire('reports/daily', { timeoutMs: 30_000 });
   * lock.onLost((err) => console.error(`stop: ${err.message}`));
   * await lock.put('/reports/daily/status', `running under token ${lock.token}`);
   * ```
   */
  acquire(name: string, options: AcquireOptions = {}): Promise<Lock> {
    return acquire(this, name, options);
  }

  /**
   * Takes the lock only if it is free now; otherwise rejects with `LockTakenError`.
   *
   * @example
   * ```ts
   * try {
   *   await using lock = await client.tryAcquire('nightly');
   *   await runNightly(lock.token, lock.signal);
   * } catch (err) {
   *   if (!isLockTakenError(err)) throw err;
   *   console.log(`already running on ${err.holderValue}`);
   * }
   * ```
   */
  tryAcquire(name: string, options: TryAcquireOptions = {}): Promise<Lock> {
    return tryAcquire(this, name, options);
  }

  /**
   * Runs `fn` holding the lock `name` and releases it afterwards. Returns what `fn` returns or
   * rethrows what it throws: a failure to release never replaces `fn`'s outcome (it is reported
   * through {@link onCleanupError} while the release goes on in the background).
   *
   * @example
   * ```ts
   * await client.withLock('invoice-42', async ({ token, signal }) => {
   *   await sendInvoice(42, { token, signal }); // the store refuses writes with an older token
   * });
   * ```
   */
  withLock<T>(
    name: string,
    fn: (lock: LockContext) => Promise<T> | T,
    options: AcquireOptions = {},
  ): Promise<T> {
    return this.#holding('withLock fn', fn, () => this.acquire(name, options), lockContext);
  }

  /** Runs `fn(context(held))` holding what `acquire` returns, then releases it (see `withLock`). */
  async #holding<H extends Lock, C, T>(
    what: string,
    fn: (context: C) => Promise<T> | T,
    acquire: () => Promise<H>,
    context: (held: H) => C,
  ): Promise<T> {
    if (typeof fn !== 'function') throw invalid(what, 'a function to run while holding it', fn);
    const held = await acquire();
    try {
      return await fn(context(held));
    } finally {
      await held.release().catch((err: LeaseholdError) => this.#report(err));
    }
  }

  /**
   * Waits for a permit of the semaphore `name`, which admits `options.permits` holders at once,
   * and returns it held, with its fencing token and its slot (0 … permits − 1). Waiting is FIFO.
   * Rejects like `acquire` (abort, `LockTimeoutError`, the session's loss), and with
   * `PermitsMismatchError` if the semaphore is in use with other permits; the waiter's key is
   * then removed.
   *
   * @example
   * ```ts
   * await using permit = await client.acquirePermit('payment-api', { permits: 3 });
   * await callPaymentApi({ slot: permit.slot, token: permit.token });
   * ```
   */
  acquirePermit(name: string, options: PermitOptions): Promise<Permit> {
    return acquirePermit(this, name, options);
  }

  /** Takes a permit only if one is free now; otherwise rejects with `LockTakenError`. */
  tryAcquirePermit(name: string, options: TryPermitOptions): Promise<Permit> {
    return tryAcquirePermit(this, name, options);
  }

  /**
   * Runs `fn({ token, slot, signal, permit })` holding a permit of `name` and releases it
   * afterwards, like `withLock`.
   *
   * @example
   * ```ts
   * await client.withPermit('payment-api', { permits: 3 }, async ({ slot, token, signal }) => {
   *   await callPaymentApi({ slot, token, signal });
   * });
   * ```
   */
  withPermit<T>(
    name: string,
    options: PermitOptions,
    fn: (permit: PermitContext) => Promise<T> | T,
  ): Promise<T> {
    return this.#holding(
      'withPermit fn',
      fn,
      () => this.acquirePermit(name, options),
      (p) => ({ token: p.token, slot: p.slot, signal: p.signal, permit: p }),
    );
  }

  /**
   * The semaphore `name` now: its limit, its holders (with their slots) and its waiters in order.
   * One linearizable read.
   */
  semaphore(name: string): Promise<SemaphoreState> {
    return semaphoreState(this.locks, name);
  }

  /**
   * Waits to read under the read/write lock `name` and returns the hold: readers share, a writer
   * excludes everyone, FIFO between them (a reader that comes after a waiting writer waits for
   * it). Rejects like `acquire`.
   */
  acquireRead(name: string, options: AcquireOptions = {}): Promise<Lock> {
    return acquireMode(this, name, 'read', options);
  }

  /** Waits to write under the read/write lock `name`: alone, after every earlier hold. */
  acquireWrite(name: string, options: AcquireOptions = {}): Promise<Lock> {
    return acquireMode(this, name, 'write', options);
  }

  /** Reads under `name` only if no writer holds or waits ahead now; else `LockTakenError`. */
  tryAcquireRead(name: string, options: TryAcquireOptions = {}): Promise<Lock> {
    return tryAcquireMode(this, name, 'read', options);
  }

  /** Writes under `name` only if nobody holds or waits now; else `LockTakenError`. */
  tryAcquireWrite(name: string, options: TryAcquireOptions = {}): Promise<Lock> {
    return tryAcquireMode(this, name, 'write', options);
  }

  /** Runs `fn` holding `name` for reading, then releases it, like `withLock`. */
  withRead<T>(
    name: string,
    fn: (lock: LockContext) => Promise<T> | T,
    options: AcquireOptions = {},
  ): Promise<T> {
    return this.#holding('withRead fn', fn, () => this.acquireRead(name, options), lockContext);
  }

  /** Runs `fn` holding `name` for writing, then releases it, like `withLock`. */
  withWrite<T>(
    name: string,
    fn: (lock: LockContext) => Promise<T> | T,
    options: AcquireOptions = {},
  ): Promise<T> {
    return this.#holding('withWrite fn', fn, () => this.acquireWrite(name, options), lockContext);
  }

  /**
   * Who holds the lock `name` now: its holder value, token, key and lease, or `undefined` if
   * it is free. One linearizable read; the answer may be stale by the time it arrives.
   */
  async holder(name: string): Promise<Holder | undefined> {
    return toHolder(await this.locks.first(encodeName(name)));
  }

  /**
   * Campaigns in `election` with `value` and resolves once elected, to the term's
   * {@link Leadership}. Candidates are elected in the order they joined (as with `etcdctl
   * elect`). Rejects with `signal.reason` on abort, `CampaignTimeoutError` after `timeoutMs`,
   * the session's `LeaseLostError` if it is lost while waiting (it is then never elected); the
   * candidacy is withdrawn in each case.
   *
   * Bad input rejects with {@link InvalidArgumentError} naming it.
   *
   * @example
   * ```ts
   * await using leadership = await client.campaign('scheduler', 'http://10.0.0.7:8080');
   * leadership.onLost((err) => console.error(`no longer leader: ${err.message}`));
   * await writeAsLeader(leadership.token, leadership.signal);
   * ```
   */
  campaign(election: string, value: string, options: CampaignOptions = {}): Promise<Leadership> {
    this.#electionsUsed = true;
    return campaign(this, election, value, options);
  }

  /**
   * Who leads `election` now: the leader's value, token, key and lease, or `undefined` if no
   * one does. One linearizable read.
   */
  async leader(election: string): Promise<Holder | undefined> {
    return toHolder(await this.elections.first(encodeName(election, 'election')));
  }

  /**
   * Every candidate of `election` now, in the order they will lead: the first is the leader.
   * One linearizable read (in pages); a candidate finds its own place by its key or lease id.
   */
  async candidates(election: string): Promise<Holder[]> {
    const { kvs } = await this.elections.candidates(encodeName(election, 'election'));
    return kvs.map((kv) => toHolder(kv)!);
  }

  /**
   * Follows who leads `election`: first the state now, then every change, in revision order,
   * including "no leader" (`leader: undefined`) and every value a leader proclaims. Survives
   * reconnects and compaction (it reads the election again and reports what changed). Ends
   * when `signal` aborts or the client closes; throws `ClusterChangedError` if the cluster
   * changes. States are queued until read: none is dropped.
   *
   * @example
   * ```ts
   * for await (const { leader, revision } of client.observe('scheduler', { signal })) {
   *   console.log(`at ${revision}: ${leader ? leader.value : 'no leader'}`);
   * }
   * ```
   */
  observe(election: string, options: ObserveOptions = {}): AsyncIterableIterator<LeaderState> {
    const segment = encodeName(election, 'election');
    checkOptions(options, ['signal']);
    this.etcd.assertUsable();
    return Observer.start(this.elections, segment, options, this.#closed.signal);
  }

  /** @internal `observe()` of an election name already encoded (for `lead()`'s onNewLeader). */
  observeSegment(segment: string, signal: AbortSignal): AsyncIterable<LeaderState> {
    return Observer.start(this.elections, segment, { signal }, this.#closed.signal);
  }

  /**
   * Runs a service's leader-only `work` in `election`: campaigns, runs `work({ token, signal,
   * leadership })` while leader, aborts its signal when the term is lost and campaigns again,
   * and on `options.signal` lets the work drain (at most `drainTimeoutMs`) and resigns. Resolves
   * once shut down or when `work` returns; see {@link LeadOptions}.
   *
   * Rejects with {@link ClientClosedError} once the client is closed, {@link ClusterChangedError} if
   * the cluster changes, {@link InvalidArgumentError} for bad input (also for `work` and the
   * callbacks).
   *
   * @example
   * ```ts
   * const shutdown = new AbortController();
   * process.once('SIGTERM', () => shutdown.abort());
   * await client.lead('scheduler', 'http://10.0.0.7:8080', async ({ token, signal }) => {
   *   while (!signal.aborted) await runOneRound(token, signal);
   * }, { signal: shutdown.signal });
   * ```
   */
  lead(
    election: string,
    value: string,
    work: LeaderWork,
    options: LeadOptions = {},
  ): Promise<void> {
    this.#electionsUsed = true;
    return lead(this, election, value, work, options);
  }

  /**
   * Calls `listener` when clean-up that goes on in the background fails: removing a released or
   * withdrawn lock key, revoking a lost or closed session's lease. Each is retried until done or
   * its session ends. Without listeners these are emitted as process warnings
   * (`LEASEHOLD_CLEANUP`), never dropped.
   */
  onCleanupError(listener: (error: LeaseholdError) => void): Disposable {
    return this.#cleanupErrors.add(listener);
  }

  /**
   * Calls `listener` when this process's event loop was blocked for at least `stallThresholdMs`
   * while sessions were live: once per live session, with the stall's length, the lease, and the
   * time left on it right after (0 and `lost: true` if the stall ran past its deadline). Every
   * stall eats into every live lease: keepalives are not sent while the loop is blocked. Also
   * logged (warn) and counted (`leasehold.stalls`, `leasehold.stall.duration`).
   */
  onStall(listener: (event: StallEvent) => void): Disposable {
    return this.#stalls.add(listener);
  }

  #stalled(stalledMs: number, sessions: Session[]): void {
    const telemetry = this.etcd.telemetry;
    telemetry.stalled(stalledMs);
    for (const session of sessions) {
      // Closed before the stall (after the monitor's last look): it held nothing meanwhile.
      if ((session.signal.reason as LeaseLostError | undefined)?.reason === 'closed') continue;
      const event = {
        stalledMs,
        leaseId: session.leaseId,
        remainingMs: session.timeLeftMs(), // reading it checks the deadline
        lost: session.isLost,
      };
      telemetry.log.warn(
        { ...event, leaseId: session.leaseId.toString(16) },
        `event loop stalled ${Math.round(stalledMs)} ms while holding a lease`,
      );
      this.#stalls.emit(event);
    }
  }

  #report(error: LeaseholdError): void {
    const endpoint = endpointOf(error);
    this.etcd.telemetry.log.warn(
      { ...(endpoint === undefined ? {} : { endpoint }), err: errField(error) },
      'background clean-up failed',
    );
    if (this.#cleanupErrors.size > 0) return this.#cleanupErrors.emit(error);
    process.emitWarning(error.message, { code: 'LEASEHOLD_CLEANUP' });
  }

  /**
   * Closes every session made from the client (revoking their leases, each bounded by
   * `callTimeoutMs`), then the watch and the connection. Afterwards nothing of the client keeps
   * the process alive, whatever state etcd is in. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed.abort();
      // Beside the revokes (each bounded by callTimeoutMs): the slot records of semaphores whose
      // last permit this client released just now.
      const sessions = [...this.#sessions.values()].map((s) => s.close());
      await Promise.allSettled([...sessions, tidyNow(this.locks)]);
      for (const watch of this.#watches) watch.close();
      this.#stallMonitor.stop();
      this.etcd.close();
      this.#unobserve();
      this.etcd.telemetry.log.info(
        { endpoints: this.etcd.options.endpoints },
        'leasehold client closed',
      );
    })();
    return this.#closing;
  }

  /** {@link Leasehold.close}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
