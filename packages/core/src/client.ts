import { raceSignal, systemClock, type Clock } from './clock.js';
import { ClientClosedError, type LeaseholdError } from './errors.js';
import { Etcd } from './etcd.js';
import { Listeners } from './latch.js';
import {
  acquire,
  tryAcquire,
  type AcquireOptions,
  type Lock,
  type LockContext,
  type TryAcquireOptions,
} from './mutex.js';
import {
  defaults,
  invalid,
  MAX_TIMER_MS,
  validateAttempts,
  validateAuth,
  validateDurationMs,
  validateEndpoints,
  validatePrefix,
  validateSignal,
  validateTls,
  type AuthOptions,
  type TlsOptions,
} from './options.js';
import { Queue } from './queue.js';
import { Session, sessionSettings, type SessionOptions } from './session.js';
import { Watch } from './watch.js';

export interface ConnectOptions {
  /** `http(s)://host:port` of one or more etcd members (a comma-separated string works too). */
  endpoints: string | readonly string[];
  /** TLS material (PEM). Use with `https://` endpoints. */
  tls?: TlsOptions;
  /** etcd username/password authentication. */
  auth?: AuthOptions;
  /** How long `connect()` keeps trying to reach etcd. Default 5000. */
  dialTimeoutMs?: number;
  /** Deadline of each etcd call. Default 5000. */
  callTimeoutMs?: number;
  /** Attempts for idempotent etcd calls, 1–10. Default 3. */
  maxAttempts?: number;
  /** Key prefix for locks. Default `/leasehold/lock/`. */
  lockPrefix?: string;
  /** How often the client re-reads its lock prefix and checks its watch. Default 5000. */
  recheckIntervalMs?: number;
  /** Options of the shared session that locks use unless given one. */
  session?: Omit<SessionOptions, 'signal'>;
  /** Aborting it cancels `connect()`, or closes the client once connected. */
  signal?: AbortSignal;
  /** @internal Injected by tests for timing maths. */
  clock?: Clock;
}

/**
 * Connects to etcd: keeps trying until a read under `lockPrefix` answers or `dialTimeoutMs`
 * passes. Wrong credentials fail here with `AuthError`, a missing permission with
 * `EtcdRequestError`, no answer with `ConnectError`. The cluster id and revision seen here are
 * what every later answer is checked against.
 */
export async function connect(options: ConnectOptions): Promise<Leasehold> {
  if (typeof options !== 'object' || options === null)
    throw invalid('options', 'an object', options);
  const ms = (name: 'dialTimeoutMs' | 'callTimeoutMs' | 'recheckIntervalMs') =>
    validateDurationMs(name, options[name] ?? defaults[name], MAX_TIMER_MS);
  const endpoints = validateEndpoints(options.endpoints);
  const clock = options.clock ?? systemClock;
  const etcdOptions = {
    clock,
    endpoints,
    dialTimeoutMs: ms('dialTimeoutMs'),
    callTimeoutMs: ms('callTimeoutMs'),
    maxAttempts: validateAttempts(options.maxAttempts ?? defaults.maxAttempts),
    tls: validateTls(options.tls, endpoints),
    auth: validateAuth(options.auth),
  };
  const lockPrefix = validatePrefix('lockPrefix', options.lockPrefix ?? defaults.lockPrefix);
  const recheckIntervalMs = ms('recheckIntervalMs');
  const shared = {
    ...sessionSettings(options.session === undefined ? {} : options.session, 'session').options,
  };
  const signal = validateSignal(options.signal);
  signal?.throwIfAborted();
  const etcd = await Etcd.open(etcdOptions, lockPrefix, signal);
  const client = new Leasehold(etcd, clock, lockPrefix, recheckIntervalMs, shared);
  signal?.addEventListener('abort', () => void client.close(), { once: true });
  return client;
}

/** A connection to one etcd cluster. Sessions and locks are made from it. */
export class Leasehold implements AsyncDisposable {
  /** @internal */
  readonly etcd: Etcd;
  /** @internal */
  readonly clock: Clock;
  /** @internal The lock queues, on one watch over the lock prefix. */
  readonly locks: Queue;
  /** Key prefix of this client's locks. */
  readonly lockPrefix: string;
  readonly #watch: Watch;
  readonly #sharedOptions: Omit<SessionOptions, 'signal'>;
  /** Live sessions by lease id (decimal). */
  readonly #sessions = new Map<string, Session>();
  readonly #cleanupErrors = new Listeners<LeaseholdError>();
  #shared: Session | undefined;
  #sharedPending: Promise<Session> | undefined;
  #closing: Promise<void> | undefined;

  /** @internal Use {@link connect}. */
  constructor(
    etcd: Etcd,
    clock: Clock,
    lockPrefix: string,
    recheckIntervalMs: number,
    sharedOptions: Omit<SessionOptions, 'signal'>,
  ) {
    this.etcd = etcd;
    this.clock = clock;
    this.lockPrefix = lockPrefix;
    this.#sharedOptions = sharedOptions;
    // The watch checks while any session lives: a session's lease may own keys by then.
    const active = () => this.#sessions.size > 0;
    this.#watch = new Watch(etcd, clock, lockPrefix, recheckIntervalMs, active);
    const sessionOf = (leaseId: string) => this.#sessions.get(leaseId);
    this.locks = new Queue(etcd, this.#watch, clock, (e) => this.#report(e), sessionOf);
    this.#watch.onRead(({ kvs }) => this.locks.sweep(kvs));
    // A key created for no entry (a join that landed late) goes as soon as its event arrives.
    this.#watch.onEvent(({ kind, kv }) => {
      if (kind === 'put' && kv.create_revision === kv.mod_revision) this.locks.sweep([kv]);
    });
  }

  /** The etcd cluster id recorded on first contact (decimal). */
  get clusterId(): string {
    return this.etcd.clusterId;
  }

  /** Grants a new lease and keeps it alive until closed or lost. */
  async session(options?: SessionOptions): Promise<Session> {
    this.etcd.assertUsable();
    const session = await Session.create(this.etcd, this.clock, (e) => this.#report(e), options);
    if (this.#closing) {
      await session.close();
      throw new ClientClosedError();
    }
    const id = session.leaseId.toString();
    this.#sessions.set(id, session);
    session.signal.addEventListener('abort', () => this.#sessions.delete(id), { once: true });
    this.#watch.wake();
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
   */
  acquire(name: string, options: AcquireOptions = {}): Promise<Lock> {
    return acquire(this, name, options);
  }

  /** Takes the lock only if it is free now; otherwise rejects with `LockTakenError`. */
  tryAcquire(name: string, options: TryAcquireOptions = {}): Promise<Lock> {
    return tryAcquire(this, name, options);
  }

  /**
   * Runs `fn` holding the lock `name` and releases it afterwards. Returns what `fn` returns or
   * rethrows what it throws: a failure to release never replaces `fn`'s outcome (it is reported
   * through {@link onCleanupError} while the release goes on in the background).
   */
  async withLock<T>(
    name: string,
    fn: (lock: LockContext) => Promise<T> | T,
    options: AcquireOptions = {},
  ): Promise<T> {
    if (typeof fn !== 'function') {
      throw invalid('withLock fn', 'a function to run while holding the lock', fn);
    }
    const lock = await this.acquire(name, options);
    try {
      return await fn({ token: lock.token, signal: lock.signal, lock });
    } finally {
      await lock.release().catch((err: LeaseholdError) => this.#report(err));
    }
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

  #report(error: LeaseholdError): void {
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
      await Promise.allSettled([...this.#sessions.values()].map((s) => s.close()));
      this.#watch.close();
      this.etcd.close();
    })();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
