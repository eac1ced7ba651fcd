import type { ILeaseKeepAliveRequest, ILeaseKeepAliveResponse } from 'etcd3';
import { callAt, raceSignal, type Clock } from './clock.js';
import {
  ClusterChangedError,
  EtcdUnavailableError,
  isLeaseholdError,
  LeaseLostError,
  SessionClosedError,
  type LeaseholdError,
} from './errors.js';
import { cleanUp, type Report } from './transport/cleanup.js';
import { endStream, type Etcd } from './transport/etcd.js';
import type { Stream } from './transport/wire.js';
import { LossLatch } from './latch.js';
import { assertTimeLeft } from './time-left.js';
import type { Telemetry } from './telemetry.js';
import { endpointOf } from './transport/members.js';
import {
  defaultSafetyMarginMs,
  defaults,
  checkOptions,
  invalid,
  tunables,
  validateSafetyMarginMs,
  validateSignal,
  validateTtlSeconds,
} from './options.js';

/** Options of `client.session(options)`; every field is optional. */
export interface SessionOptions {
  /** Lease TTL in whole seconds, from 2 to 9,000,000,000. Default 10. */
  ttlSeconds?: number;
  /**
   * How much earlier than `send time of the last answered keepalive + TTL` the session declares
   * itself lost. In [0, TTL). Default: 10% of the TTL, at most 1000 ms.
   */
  safetyMarginMs?: number;
  /**
   * Resume this lease, granted earlier (by this process before it restarted, say), instead of
   * granting a new one. Its keys, such as a candidacy or a lock key, are kept for the caller to
   * take up again: campaigning or acquiring on the resumed session adopts them with their token.
   * Fails with `LeaseLostError` (`gone`) if the lease no longer exists. Not with `ttlSeconds`:
   * the TTL was fixed when the lease was granted.
   */
  leaseId?: bigint;
  /** Aborting it closes the session (and revokes the lease); while granting, it cancels. */
  signal?: AbortSignal;
}

type KeepAliveStream = Stream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

/** What a session tells each queue entry on it when it ends (see {@link Session.attach}). */
export interface SessionMember {
  sessionEnded(error: LeaseLostError): void;
}

/** Validated session options, with defaults (`name` says where they came from in errors). */
export function sessionSettings(options: SessionOptions, name = 'options') {
  checkOptions(options, ['ttlSeconds', 'safetyMarginMs', 'leaseId', 'signal'], { name });
  const ttlSeconds = validateTtlSeconds(options.ttlSeconds ?? defaults.ttlSeconds);
  const margin = options.safetyMarginMs ?? defaultSafetyMarginMs(ttlSeconds);
  validateSafetyMarginMs(margin, ttlSeconds);
  const { leaseId } = options;
  if (leaseId !== undefined) {
    if (typeof leaseId !== 'bigint' || leaseId <= 0n || leaseId >= 2n ** 63n) {
      throw invalid(`${name}.leaseId`, 'a lease id as a bigint from 1 to 2^63-1', leaseId);
    }
    if (options.ttlSeconds !== undefined) {
      throw invalid(
        `${name}.ttlSeconds`,
        'left out with leaseId (a resumed lease keeps the TTL it was granted with)',
        options.ttlSeconds,
      );
    }
  }
  return { ttlSeconds, margin, leaseId, signal: validateSignal(options.signal), options };
}

/** A granted (or resumed) lease: id, TTL and the revision etcd answered at. */
interface Grant {
  leaseId: bigint;
  ttlSeconds: number;
  /** For a resumed lease, the TTL it has left (the deadline starts from it). */
  remainingSeconds: number;
  revision: bigint;
}

/** Grants a lease: its id, the TTL etcd granted (which may be higher) and the revision. */
export async function newLease(etcd: Etcd, what: string, ttlSeconds: number, idempotent: boolean) {
  const res = await etcd.call(
    what,
    (o) => etcd.client.leaseClient.leaseGrant({ TTL: ttlSeconds, ID: 0 }, o),
    { idempotent },
  );
  return {
    leaseId: BigInt(res.ID),
    ttlSeconds: Number(res.TTL),
    revision: BigInt(res.header.revision),
  };
}

const timeToLive = (etcd: Etcd, leaseId: bigint) =>
  etcd.call(
    'lease time-to-live',
    (o) => etcd.client.leaseClient.leaseTimeToLive({ ID: leaseId.toString() }, o),
    { idempotent: true },
  );

/** Grants a new lease or, with `leaseId`, checks that it is still alive. */
async function grant(etcd: Etcd, ttlSeconds: number, leaseId: bigint | undefined): Promise<Grant> {
  if (leaseId === undefined) {
    // Not retried: a grant whose answer was lost would leave a second, orphaned lease.
    const lease = await newLease(etcd, 'lease grant', ttlSeconds, false);
    return { ...lease, remainingSeconds: lease.ttlSeconds };
  }
  const res = await timeToLive(etcd, leaseId);
  // etcd rounds the time left down to whole seconds, so the deadline errs early.
  if (!(Number(res.TTL) > 0)) {
    const message = `lease ${leaseId.toString(16)} cannot be resumed: etcd reports it no longer exists (it expired or was revoked)`;
    throw new LeaseLostError('gone', leaseId, message);
  }
  return {
    leaseId,
    ttlSeconds: Number(res.grantedTTL),
    remainingSeconds: Number(res.TTL),
    revision: BigInt(res.header.revision),
  };
}

/**
 * A keepalive unanswered for this long means the stream is stuck (a frozen member keeps the TCP
 * connection open, so no error ever arrives): drop it and reopen, which lets the client pick
 * another member well before the lease deadline. A client whose `attemptTimeoutMs` is raised (a
 * slow link) waits that long, up to a sixth of the TTL.
 */
export function answerTimeoutMs(ttlSeconds: number, attemptTimeoutMs = 1_000): number {
  const sixth = (ttlSeconds * 1000) / 6;
  return Math.max(Math.min(1_000, Math.max(250, sixth)), Math.min(attemptTimeoutMs, sixth));
}

/**
 * Revokes a lease until etcd confirms it is gone. A restarted etcd restores leases with a fresh
 * TTL, so "it will expire anyway" is no bound while etcd is down; once etcd answers again, the
 * revoke gets `revokeRetryTtls` TTLs more before it gives up and reports.
 */
function revokeUntilGone(
  etcd: Etcd,
  clock: Clock,
  report: Report,
  lease: { leaseId: bigint; ttlSeconds: number },
  firstTimeoutMs = etcd.options.callTimeoutMs,
): Promise<void> {
  const answersBefore = etcd.answers;
  let giveUpAt = Infinity;
  const revoke = (attempt: number) =>
    etcd.call(
      'lease revoke',
      (o) => etcd.client.leaseClient.leaseRevoke({ ID: lease.leaseId.toString() }, o),
      { idempotent: true, once: true, timeoutMs: attempt === 0 ? firstTimeoutMs : undefined },
    );
  const gone = (err?: unknown) =>
    /lease not found/.test(String((err as Error | undefined)?.message));
  return cleanUp(
    clock,
    report,
    `revoke of lease ${lease.leaseId.toString(16)}`,
    revoke,
    gone,
    () => {
      if (giveUpAt === Infinity && etcd.answers > answersBefore) {
        giveUpAt = clock.now() + tunables.revokeRetryTtls * lease.ttlSeconds * 1000;
      }
      return clock.now() >= giveUpAt;
    },
  );
}

/**
 * One etcd lease, kept alive on one stream and shared by every lock and campaign made from it.
 *
 * Its local deadline is the send time of the last answered keepalive + the TTL granted − the
 * safety margin, on a monotonic clock: etcd starts the TTL when it receives a keepalive, after it
 * was sent, and may extend a lease but never shortens it, so the client always gives up first.
 *
 * The session is *lost* — `signal` aborts with a {@link LeaseLostError}, exactly once — when the
 * deadline passes, when etcd says the lease is gone, when the cluster changes, or when it is
 * closed. Every read of `signal`, `isLost`, `timeLeftMs()` and `throwIfLost()` compares the
 * clock with the deadline first, so the first code to run after a stalled event loop already
 * sees the loss, whether or not a timer has fired yet.
 */
export class Session implements AsyncDisposable {
  readonly #latch = new LossLatch<LeaseLostError>(() => this.#checkDeadline());
  readonly #lost = new LossLatch<LeaseLostError>();
  readonly #sentAt: number[] = [];
  readonly #members = new Set<SessionMember>();
  /** Timers and listeners by name; every one is stopped when the session ends. */
  readonly #stops = new Map<string, () => void>();
  #expiresAt: number;
  #stream: KeepAliveStream | undefined;
  #reopenDelayMs: number = tunables.retryMinMs;
  /** Members that answered "lease gone" since the last live answer. */
  readonly #goneFrom: string[] = [];
  #closing: Promise<void> | undefined;

  private constructor(
    private readonly etcd: Etcd,
    private readonly clock: Clock,
    private readonly report: Report,
    grant: Grant,
    /**
     * How much earlier than the lease's expiry, as etcd counts it, this session declares itself
     * lost; see {@link SessionOptions.safetyMarginMs}.
     */
    readonly safetyMarginMs: number,
    grantSentAt: number,
  ) {
    this.leaseId = grant.leaseId;
    this.ttlSeconds = grant.ttlSeconds;
    this.startRevision = grant.revision;
    this.#expiresAt = grantSentAt + grant.remainingSeconds * 1000 - safetyMarginMs;
  }

  /** The lease id etcd granted. */
  readonly leaseId: bigint;
  /** The TTL etcd granted, which may be higher than the one asked for. */
  readonly ttlSeconds: number;
  /** @internal The revision the lease was granted (or resumed) at: later keys are this process's. */
  readonly startRevision: bigint;

  /** @internal Use `client.session()`. */
  static async create(
    etcd: Etcd,
    clock: Clock,
    report: Report,
    options: SessionOptions = {},
  ): Promise<Session> {
    const { ttlSeconds, margin, leaseId, signal } = sessionSettings(options);
    signal?.throwIfAborted();
    const sentAt = clock.now();
    const granting = grant(etcd, ttlSeconds, leaseId);
    let res: Grant;
    try {
      res = signal ? await raceSignal(granting, signal) : await granting;
    } catch (err) {
      // Abandoned mid-grant: a lease etcd grants anyway must not live out its TTL. (A resumed
      // lease is the caller's: left as it was.)
      if (leaseId === undefined) {
        void granting.then(
          (late) => revokeUntilGone(etcd, clock, report, late),
          () => undefined,
        );
      }
      throw err;
    }
    const session = new Session(
      etcd,
      clock,
      report,
      res,
      // A resumed lease's default margin follows the TTL it was granted with.
      Math.min(
        leaseId !== undefined && options.safetyMarginMs === undefined
          ? defaultSafetyMarginMs(res.ttlSeconds)
          : margin,
        res.ttlSeconds * 1000 - 1,
      ),
      sentAt,
    );
    session.#start(signal);
    return session;
  }

  /**
   * Aborts once, with a {@link LeaseLostError}, when the session is lost or closed. Reading its
   * `aborted`, `reason` or `throwIfAborted()` checks the deadline first, also on a signal kept
   * from earlier.
   */
  get signal(): AbortSignal {
    return this.#latch.signal;
  }

  #checkDeadline(): void {
    if (this.#latch.reason || this.clock.now() < this.#expiresAt) return;
    const message = `no keepalive for lease ${this.leaseId.toString(16)} was answered before its local deadline (TTL ${this.ttlSeconds} s minus ${this.safetyMarginMs} ms safety margin, counted from the send time of the last answered keepalive)`;
    this.#lose(new LeaseLostError('deadline', this.leaseId, message));
  }

  /** Whether the session is lost or closed. */
  get isLost(): boolean {
    return this.signal.aborted;
  }

  /**
   * The local deadline itself, on the client's monotonic clock (`performance.now()` unless a
   * clock was injected): the send time of the last answered keepalive plus the granted TTL,
   * minus the safety margin. Unlike `timeLeftMs()` it keeps its value once the session is lost,
   * so a process can record when its loss became due; reading it checks nothing.
   */
  get deadlineAtMs(): number {
    return this.#expiresAt;
  }

  /** Milliseconds left before the local deadline; 0 once lost. The name every handle shares. */
  timeLeftMs(): number {
    return this.isLost ? 0 : this.#expiresAt - this.clock.now();
  }

  /** @deprecated The old name of {@link Session.timeLeftMs}; removed in 1.0. */
  remainingMs(): number {
    return this.timeLeftMs();
  }

  /**
   * Returns the milliseconds left before the local deadline if at least `ms` are; otherwise
   * throws `InsufficientLeaseTimeError` (with the loss as its cause once lost), so work that
   * cannot finish inside the lease is not started.
   */
  assertTimeLeft(ms: number): number {
    const leftMs = this.timeLeftMs();
    const lost = this.isLost ? (this.signal.reason as Error) : undefined;
    const what = `session for lease ${this.leaseId.toString(16)}`;
    return assertTimeLeft(ms, { leftMs, lost, what });
  }

  /** @internal Where this session's logs and metrics go. */
  get telemetry(): Telemetry {
    return this.etcd.telemetry;
  }

  /**
   * @internal etcd refused a write with this lease because it no longer exists. A refusal is an
   * error without a header, so it does not say which cluster sent it, and a member of another
   * cluster (which never had the lease) refuses the same way: believed once the cluster confirms
   * it (a lease time-to-live, answered by the leader, with the cluster id checked). Resolves to
   * the error to throw: the session's loss; `ClusterChangedError`; or `EtcdUnavailableError` if
   * the cluster could not be asked, or says the lease is alive (the refusal is not believed).
   */
  async gone(cause: unknown): Promise<LeaseholdError> {
    const id = this.leaseId.toString(16);
    let ttl: number;
    try {
      ttl = Number((await timeToLive(this.etcd, this.leaseId)).TTL);
    } catch (err) {
      if (isLeaseholdError(err)) return err;
      return new EtcdUnavailableError(`etcd lease time-to-live of ${id} failed`, { cause: err });
    }
    if (ttl > 0) {
      const message = `a write with lease ${id} was refused as "lease not found", but the cluster reports the lease alive (TTL ${ttl} s): the refusal is not believed (it came from a member of another cluster?)`;
      return new EtcdUnavailableError(message, { cause });
    }
    const message = `etcd refused a write with lease ${id}: it no longer exists (it expired or was revoked)`;
    this.#lose(new LeaseLostError('gone', this.leaseId, message, { cause }));
    return this.signal.reason as LeaseLostError;
  }

  /** Calls `listener` once if the session is lost (not when it is closed). */
  onLost(listener: (error: LeaseLostError) => void): Disposable {
    return this.#lost.on(listener);
  }

  /**
   * @internal Tells `member` (a queue entry on this session) when the session ends, closing
   * included, until `detach`. One set on the session, not a listener per entry: at 100,000
   * holds the listeners were a good part of their memory.
   */
  attach(member: SessionMember): void {
    this.#members.add(member);
  }

  /** @internal See {@link attach}. */
  detach(member: SessionMember): void {
    this.#members.delete(member);
  }

  /** Throws the loss reason if the session is lost or closed. */
  throwIfLost(): void {
    this.signal.throwIfAborted();
  }

  /**
   * Stops the keepalive and revokes the lease, which deletes every key attached to it.
   * Idempotent. The revoke waits at most the lease's remaining time (after that etcd has
   * expired it anyway) and `callTimeoutMs`; if it fails, it is retried in the background while
   * the client stays open.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const leftMs = this.timeLeftMs();
      this.#lose(new SessionClosedError(this.leaseId));
      if (leftMs <= 0) return;
      const timeoutMs = Math.min(leftMs, this.etcd.options.callTimeoutMs);
      await revokeUntilGone(this.etcd, this.clock, this.report, this, timeoutMs);
    })();
    return this.#closing;
  }

  /** {@link Session.close}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** Calls `fn` at `at` (replacing the timer of the same name); all stop when the session ends. */
  #arm(name: string, at: number, fn: () => void): void {
    this.#stops.get(name)?.();
    this.#stops.set(name, callAt(this.clock, at, fn));
  }

  #start(signal: AbortSignal | undefined): void {
    this.#stops.set('hold', this.clock.hold());
    this.#arm('deadline', this.#expiresAt, () => this.isLost);
    const changed = this.etcd.onChanged((cause) => {
      this.#lose(new ClusterChangedError(this.leaseId, cause.detail, { cause }));
    });
    const onAbort = () => void this.close();
    signal?.addEventListener('abort', onAbort, { once: true });
    this.#stops.set('listeners', () => {
      changed[Symbol.dispose]();
      signal?.removeEventListener('abort', onAbort);
    });
    const tick = () => {
      this.#sendKeepAlive();
      this.#arm('tick', this.clock.now() + (this.ttlSeconds * 1000) / 3, tick);
    };
    this.#arm('tick', this.clock.now() + (this.ttlSeconds * 1000) / 3, tick);
    void this.#openStream();
  }

  async #openStream(): Promise<void> {
    if (this.#latch.reason) return;
    let stream: KeepAliveStream;
    try {
      stream = await this.etcd.stream((client) => client.leaseClient.leaseKeepAlive());
    } catch (err) {
      const [endpoint, delayMs] = [endpointOf(err), this.#reopenDelayMs];
      this.telemetry.keepaliveStream('open-failed', this.leaseId, { endpoint, err, delayMs });
      return this.#reopenLater(this.#reopenDelayMs);
    }
    if (this.#latch.reason || this.#stream) return stream.end(); // lost, or another won
    this.#stream = stream;
    this.#sentAt.length = 0;
    const endpoint = endpointOf(stream);
    this.telemetry.keepaliveStream('opened', this.leaseId, { endpoint });
    const onBroken = (err?: Error) => {
      if (this.#stream !== stream) return;
      const delayMs = this.#reopenDelayMs;
      this.telemetry.keepaliveStream('broken', this.leaseId, { endpoint, err, delayMs });
      this.#stream = undefined;
      this.#reopenLater(this.#reopenDelayMs);
    };
    stream.on('data', (res) => this.#stream === stream && this.#onAnswer(stream, res));
    stream.on('error', onBroken);
    stream.on('end', onBroken);
    this.#sendKeepAlive();
  }

  #reopenLater(delayMs: number): void {
    if (this.#latch.reason) return;
    this.#reopenDelayMs = Math.min(this.#reopenDelayMs * 2, tunables.retryMaxMs);
    this.#arm('reopen', this.clock.now() + delayMs, () => void this.#openStream());
  }

  #sendKeepAlive(): void {
    const stream = this.#stream;
    if (!stream || this.#latch.reason) return;
    this.#sentAt.push(this.clock.now());
    try {
      stream.write({ ID: this.leaseId.toString() });
    } catch {
      this.#sentAt.pop();
      return;
    }
    if (this.#sentAt.length === 1) this.#armStuck(stream);
  }

  /** Watches the oldest unanswered keepalive: unanswered too long means the stream is stuck. */
  #armStuck(stream: KeepAliveStream): void {
    const oldest = this.#sentAt[0];
    if (oldest === undefined) return this.#stops.get('stuck')?.();
    const timeoutMs = answerTimeoutMs(this.ttlSeconds, this.etcd.attemptTimeoutMs);
    this.#arm('stuck', oldest + timeoutMs, () => {
      if (this.#stream !== stream) return;
      const details = { endpoint: endpointOf(stream), answerTimeoutMs: timeoutMs };
      this.telemetry.keepaliveStream('stuck', this.leaseId, details);
      this.etcd.stuck(stream);
      this.#dropStream(true);
      void this.#openStream();
    });
  }

  #onAnswer(stream: KeepAliveStream, res: ILeaseKeepAliveResponse): void {
    // etcd answers keepalives on one stream in order, so the oldest send time is this answer's.
    const sentAt = this.#sentAt.shift();
    if (sentAt === undefined) return;
    this.etcd.answered(stream);
    this.telemetry.keepalive(this.clock.now() - sentAt);
    this.#armStuck(stream);
    try {
      this.etcd.observe(res.header);
    } catch {
      return; // closed, or another cluster: the change listener ends the session
    }
    // A deadline that passed before this answer could be read is final, like any other read.
    if (this.isLost) return;
    if (!(Number(res.TTL) > 0)) {
      // A member that just woke from a pause (or was cut off) can answer from a stale view and
      // call a live lease expired. Ask again on fresh streams (each may reach another member);
      // the local deadline still bounds how long this can take.
      this.#goneFrom.push(res.header.member_id);
      if (this.#goneFrom.length < tunables.goneConfirmations) {
        this.#dropStream(false);
        return this.#reopenLater(this.#reopenDelayMs); // 100, 200, 400 ms: room to catch up
      }
      const message = `etcd reports lease ${this.leaseId.toString(16)} no longer exists (TTL ${res.TTL}, ${this.#goneFrom.length} answers on fresh streams, from members ${[...new Set(this.#goneFrom)].join(', ')}): it expired or was revoked`;
      return this.#lose(new LeaseLostError('gone', this.leaseId, message));
    }
    this.#goneFrom.length = 0;
    this.#reopenDelayMs = tunables.retryMinMs;
    // Never moves the deadline backwards: answers to earlier sends may arrive late.
    this.#expiresAt = Math.max(
      this.#expiresAt,
      sentAt + Number(res.TTL) * 1000 - this.safetyMarginMs,
    );
    this.#arm('deadline', this.#expiresAt, () => this.isLost);
  }

  #dropStream(stuck: boolean): void {
    endStream(this.#stream, stuck);
    this.#stream = undefined;
  }

  #lose(reason: LeaseLostError): void {
    if (!this.#latch.trip(reason)) return;
    for (const member of [...this.#members]) member.sessionEnded(reason);
    this.#members.clear();
    this.telemetry.sessionEnded(reason);
    if (reason.reason !== 'closed') this.#lost.trip(reason);
    for (const stop of this.#stops.values()) stop();
    this.#dropStream(false);
    // A session that only lost touch may still own its lease on the server: revoke it so its
    // locks pass to the next holder now rather than at expiry.
    if (reason.reason === 'deadline')
      void revokeUntilGone(this.etcd, this.clock, this.report, this);
  }
}

export function assertSession(value: unknown): Session {
  if (!(value instanceof Session)) {
    throw invalid('session', 'a Session created by client.session()', value);
  }
  return value;
}
