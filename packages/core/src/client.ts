import { systemClock, type Clock } from './clock.js';
import { ClientClosedError, ClusterChangedError, InvalidArgumentError } from './errors.js';
import { EtcdTransport } from './etcd.js';
import { KeyWatch } from './key-watch.js';
import { Lock, type AcquireOptions, type LockContext, type TryAcquireOptions } from './lock.js';
import { acquireLock } from './mutex.js';
import {
  defaults,
  describe,
  validateAttempts,
  validateDurationMs,
  validateEndpoints,
  validatePrefix,
  type AuthOptions,
  type TlsOptions,
} from './options.js';
import { Session, type SessionOptions } from './session.js';

export interface ConnectOptions {
  /** `http(s)://host:port` of one or more etcd members (a comma-separated string works too). */
  endpoints: string | readonly string[];
  /** TLS material (PEM). Use with `https://` endpoints. */
  tls?: TlsOptions;
  /** etcd username/password authentication. */
  auth?: AuthOptions;
  /** How long `connect()` waits for etcd to answer. Default 5000. */
  dialTimeoutMs?: number;
  /** Deadline of each etcd call. Default 5000. */
  callTimeoutMs?: number;
  /** Attempts for idempotent etcd calls, 1–10. Default 3. */
  maxAttempts?: number;
  /** Key prefix for locks. Default `/leasehold/lock/`. */
  lockPrefix?: string;
  /** Options of the shared session that locks use unless given one. */
  session?: Omit<SessionOptions, 'signal'>;
  /** Aborting it closes the client. */
  signal?: AbortSignal;
  /** @internal Injected by tests for timing maths. */
  clock?: Clock;
}

/**
 * Connects to etcd and waits for an answer, failing within `dialTimeoutMs` with the list of
 * endpoints tried. The cluster id seen here is the one every later response must carry.
 */
export async function connect(options: ConnectOptions): Promise<Leasehold> {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(`connect() needs an options object, got ${describe(options)}`);
  }
  const endpoints = validateEndpoints(options.endpoints);
  const dialTimeoutMs = validateDurationMs(
    'dialTimeoutMs',
    options.dialTimeoutMs ?? defaults.dialTimeoutMs,
  );
  const callTimeoutMs = validateDurationMs(
    'callTimeoutMs',
    options.callTimeoutMs ?? defaults.callTimeoutMs,
  );
  const maxAttempts = validateAttempts(options.maxAttempts ?? defaults.maxAttempts);
  const lockPrefix = validatePrefix('lockPrefix', options.lockPrefix ?? defaults.lockPrefix);
  const signal = options.signal;
  signal?.throwIfAborted();
  if (options.tls && endpoints.some((e) => e.startsWith('http:'))) {
    throw new InvalidArgumentError(
      `tls is set but endpoints use http (${endpoints.join(', ')}); use https:// endpoints`,
    );
  }
  const transport = await EtcdTransport.open({
    endpoints,
    dialTimeoutMs,
    callTimeoutMs,
    maxAttempts,
    tls: options.tls,
    auth: options.auth,
  });
  const client = Leasehold.open(
    transport,
    options.clock ?? systemClock,
    lockPrefix,
    options.session ?? {},
  );
  signal?.addEventListener('abort', () => void client.close(), { once: true });
  return client;
}

/** A connection to one etcd cluster. Sessions, locks and elections are made from it. */
export class Leasehold implements AsyncDisposable {
  #shared: Promise<Session> | undefined;
  #clusterChange: ClusterChangedError | undefined;
  readonly #sessions = new Set<Session>();
  #closed = false;
  /** @internal */
  readonly transport: EtcdTransport;
  /** @internal */
  readonly clock: Clock;
  /** @internal One watch over the lock prefix for every lock held through this client. */
  readonly keyWatch: KeyWatch;
  /** Key prefix of this client's locks. */
  readonly lockPrefix: string;
  readonly #sharedSessionOptions: Omit<SessionOptions, 'signal'>;

  private constructor(
    transport: EtcdTransport,
    clock: Clock,
    lockPrefix: string,
    sharedSessionOptions: Omit<SessionOptions, 'signal'>,
  ) {
    this.transport = transport;
    this.clock = clock;
    this.lockPrefix = lockPrefix;
    this.#sharedSessionOptions = sharedSessionOptions;
    this.keyWatch = new KeyWatch(transport, lockPrefix);
    transport.onClusterChanged((expected, actual) => {
      this.#clusterChange ??= new ClusterChangedError(0n, expected, actual);
    });
  }

  /** @internal Use {@link connect}. */
  static open(
    transport: EtcdTransport,
    clock: Clock,
    lockPrefix: string,
    sharedSessionOptions: Omit<SessionOptions, 'signal'>,
  ): Leasehold {
    return new Leasehold(transport, clock, lockPrefix, sharedSessionOptions);
  }

  /** The etcd cluster id recorded on first contact (decimal). */
  get clusterId(): string {
    return this.transport.clusterId;
  }

  /** Grants a new lease and keeps it alive until closed or lost. */
  async session(options?: SessionOptions): Promise<Session> {
    this.assertUsable();
    const session = await Session.create(this.transport, this.clock, options);
    this.#sessions.add(session);
    session.onLost(() => this.#sessions.delete(session));
    return session;
  }

  /**
   * The session locks use when none is given: one lease and one keepalive stream for every hold
   * in the process. After it is lost, the next call grants a fresh one.
   */
  sharedSession(): Promise<Session> {
    this.assertUsable();
    const current = this.#shared;
    if (current) {
      return current.then(
        (s) => (s.isLost ? this.#newShared() : s),
        () => this.#newShared(),
      );
    }
    return this.#newShared();
  }

  #newShared(): Promise<Session> {
    const next = this.session(this.#sharedSessionOptions);
    this.#shared = next;
    return next;
  }

  /**
   * Waits for the lock `name` and returns it held. Waiting is FIFO. Rejects with `signal.reason`
   * on abort, with `LockTimeoutError` after `timeoutMs`, with `LeaseLostError` if the session is
   * lost while waiting.
   */
  async acquire(name: string, options: AcquireOptions = {}): Promise<Lock> {
    return acquireLock(this, name, options, true);
  }

  /** Takes the lock only if it is free now; otherwise rejects with `LockTakenError`. */
  async tryAcquire(name: string, options: TryAcquireOptions = {}): Promise<Lock> {
    return acquireLock(this, name, options, false);
  }

  /** Runs `fn` holding the lock `name` and always releases it, also when `fn` throws. */
  async withLock<T>(
    name: string,
    fn: (lock: LockContext) => Promise<T> | T,
    options: AcquireOptions = {},
  ): Promise<T> {
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError(`withLock needs a function to run, got ${describe(fn)}`);
    }
    const lock = await this.acquire(name, options);
    try {
      return await fn({ token: lock.token, signal: lock.signal, lock });
    } finally {
      await lock.release();
    }
  }

  /** @internal Throws if the client is closed or saw its cluster change. */
  assertUsable(): void {
    if (this.#clusterChange) throw this.#clusterChange;
    if (this.#closed) throw new ClientClosedError();
  }

  /** Closes every session made from this client (revoking their leases), then the connection. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#sessions].map((s) => s.close()));
    this.keyWatch.close();
    this.transport.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
