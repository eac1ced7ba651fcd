import type { Clock } from './clock.js';
import { LeaseDeadline } from './deadline.js';
import {
  ClusterChangedError,
  InvalidArgumentError,
  LeaseLostError,
  SessionClosedError,
} from './errors.js';
import type { EtcdTransport, KeepAliveStream } from './etcd.js';
import { LossLatch } from './latch.js';
import {
  defaults,
  defaultSafetyMarginMs,
  validateSafetyMarginMs,
  validateSignal,
  validateTtlSeconds,
} from './options.js';
import { callAt } from './timer.js';

export interface SessionOptions {
  /** Lease TTL in whole seconds, from 2 to 9,000,000,000. Default 10. */
  ttlSeconds?: number;
  /**
   * How much earlier than `send time of the last answered keepalive + TTL` the session declares
   * itself lost. In [0, TTL). Default: 10% of the TTL, at most 1000 ms.
   */
  safetyMarginMs?: number;
  /** Aborting it closes the session (and revokes the lease). */
  signal?: AbortSignal;
}

const RECONNECT_MIN_MS = 50;
const RECONNECT_MAX_MS = 1_000;

/** "Lease not found" answers, each on a fresh stream, before the session believes them. */
const GONE_CONFIRMATIONS = 3;
const CONFIRM_DELAY_MS = 100;

/**
 * A keepalive unanswered for this long means the stream is stuck (a frozen member keeps the TCP
 * connection open, so no error ever arrives): drop the stream and reopen it, which lets the
 * client pick another member well before the lease deadline. etcd answers keepalives in
 * milliseconds, so a false alarm only costs a reconnect.
 */
export function answerTimeoutMs(ttlSeconds: number): number {
  return Math.min(1_000, Math.max(250, (ttlSeconds * 1000) / 6));
}

/**
 * One etcd lease, kept alive on one stream and shared by every lock and campaign made from it.
 *
 * The session is *lost* — `signal` aborts with a {@link LeaseLostError}, exactly once — when the
 * local deadline passes without an answered keepalive, when etcd says the lease is gone, when a
 * response comes from a different cluster, or when the session is closed. Everything held
 * through the session is lost with it.
 */
export class Session implements AsyncDisposable {
  readonly #latch = new LossLatch<LeaseLostError>();
  readonly #deadline: LeaseDeadline;
  readonly #sentAt: number[] = [];
  #stream: KeepAliveStream | undefined;
  #cancelDeadline: () => void = () => undefined;
  #keepAliveTimer: ReturnType<typeof setInterval> | undefined;
  #reconnectDelayMs = RECONNECT_MIN_MS;
  #goneAnswers = 0;
  #closing: Promise<void> | undefined;
  readonly #disposables: Disposable[] = [];

  private constructor(
    private readonly transport: EtcdTransport,
    private readonly clock: Clock,
    /** The lease id etcd granted. */
    readonly leaseId: bigint,
    /** The TTL etcd granted, which may be higher than the one asked for. */
    readonly ttlSeconds: number,
    readonly safetyMarginMs: number,
    grantSentAt: number,
  ) {
    this.#deadline = new LeaseDeadline(clock, safetyMarginMs, grantSentAt, ttlSeconds);
  }

  /** @internal Use `client.session()`. */
  static async create(
    transport: EtcdTransport,
    clock: Clock,
    options: SessionOptions = {},
  ): Promise<Session> {
    const ttlSeconds = validateTtlSeconds(options.ttlSeconds ?? defaults.ttlSeconds);
    const safetyMarginMs = validateSafetyMarginMs(
      options.safetyMarginMs ?? defaultSafetyMarginMs(ttlSeconds),
      ttlSeconds,
    );
    const signal = validateSignal(options.signal);
    signal?.throwIfAborted();

    const sentAt = clock.now();
    // Not retried: a grant whose answer was lost would leave a second, orphaned lease.
    const res = await transport.call(
      'lease grant',
      (o) => transport.client.leaseClient.leaseGrant({ TTL: ttlSeconds, ID: 0 }, o),
      { idempotent: false },
    );
    const granted = Number(res.TTL);
    const session = new Session(
      transport,
      clock,
      BigInt(res.ID),
      granted,
      Math.min(safetyMarginMs, granted * 1000 - 1),
      sentAt,
    );
    session.#start(signal);
    return session;
  }

  /** Aborts once, with a {@link LeaseLostError}, when the session is lost or closed. */
  get signal(): AbortSignal {
    return this.#latch.signal;
  }

  /** Whether the session is lost or closed. */
  get isLost(): boolean {
    return this.#latch.signal.aborted;
  }

  /** Milliseconds until the local deadline; 0 once lost. */
  remainingMs(): number {
    return this.isLost ? 0 : this.#deadline.remainingMs();
  }

  /** Calls `listener` once when the session is lost; returns a disposable that unsubscribes. */
  onLost(listener: (error: LeaseLostError) => void): Disposable {
    return this.#latch.on(listener);
  }

  /** Throws the loss reason if the session is lost. */
  throwIfLost(): void {
    const reason = this.#latch.reason;
    if (reason) throw reason;
  }

  /**
   * Stops the keepalive and revokes the lease, which deletes every key attached to it.
   * Idempotent. The revoke is bounded by the lease's remaining time: after that etcd has
   * expired it anyway.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #close(): Promise<void> {
    const remainingMs = this.#deadline.remainingMs();
    const wasLost = this.isLost;
    this.#lose(new SessionClosedError(this.leaseId));
    if (wasLost || remainingMs <= 0) return;
    await this.#revoke(Math.min(remainingMs, this.transport.options.callTimeoutMs));
  }

  async #revoke(timeoutMs: number): Promise<void> {
    try {
      await this.transport.call(
        'lease revoke',
        (o) => this.transport.client.leaseClient.leaseRevoke({ ID: this.leaseId.toString() }, o),
        { idempotent: true, timeoutMs },
      );
    } catch {
      // The lease expires on its own within its TTL; a failed revoke only delays that.
    }
  }

  #start(signal: AbortSignal | undefined): void {
    this.#armDeadline();
    this.#disposables.push(
      this.transport.onClusterChanged((expected, actual) =>
        this.#lose(new ClusterChangedError(this.leaseId, expected, actual)),
      ),
    );
    if (signal) {
      const onAbort = () => void this.close();
      signal.addEventListener('abort', onAbort, { once: true });
      this.#disposables.push({
        [Symbol.dispose]: () => signal.removeEventListener('abort', onAbort),
      });
    }
    const intervalMs = Math.min((this.ttlSeconds * 1000) / 3, 2 ** 31 - 1);
    this.#keepAliveTimer = setInterval(() => this.#sendKeepAlive(), intervalMs);
    this.#keepAliveTimer.unref();
    void this.#openStream();
  }

  #armDeadline(): void {
    this.#cancelDeadline();
    this.#cancelDeadline = callAt(this.clock, this.#deadline.expiresAt, () => {
      this.#lose(
        new LeaseLostError(
          'deadline',
          this.leaseId,
          `no keepalive for lease ${this.leaseId.toString(16)} was answered before its local deadline (TTL ${this.ttlSeconds} s minus ${this.safetyMarginMs} ms safety margin, counted from the send time of the last answered keepalive)`,
        ),
      );
    });
  }

  async #openStream(): Promise<void> {
    if (this.isLost) return;
    let stream: KeepAliveStream;
    try {
      stream = await this.transport.openKeepAlive();
    } catch {
      return this.#reopenLater();
    }
    if (this.isLost || this.#stream) return stream.end(); // lost, or another open won
    this.#stream = stream;
    this.#sentAt.length = 0;
    const onBroken = () => {
      if (this.#stream !== stream) return;
      this.#stream = undefined;
      this.#reopenLater();
    };
    stream.on('data', (res) => {
      if (this.#stream !== stream) return;
      this.#reconnectDelayMs = RECONNECT_MIN_MS;
      this.#onAnswer(res.TTL, res.header);
    });
    stream.on('error', onBroken);
    stream.on('end', onBroken);
    this.#sendKeepAlive();
  }

  #reopenLater(): void {
    if (this.isLost) return;
    const delay = this.#reconnectDelayMs;
    this.#reconnectDelayMs = Math.min(delay * 2, RECONNECT_MAX_MS);
    this.clock.setTimeout(() => void this.#openStream(), delay);
  }

  #sendKeepAlive(): void {
    const stream = this.#stream;
    if (!stream || this.isLost) return;
    const sentAt = this.clock.now();
    this.#sentAt.push(sentAt);
    try {
      stream.write({ ID: this.leaseId.toString() });
    } catch {
      this.#sentAt.pop();
      return;
    }
    this.clock.setTimeout(() => {
      if (this.#stream !== stream || this.isLost || this.#sentAt[0] !== sentAt) return;
      this.#dropStream(true);
      void this.#openStream();
    }, answerTimeoutMs(this.ttlSeconds));
  }

  #onAnswer(ttl: string, header: Parameters<EtcdTransport['checkHeader']>[0]): void {
    // etcd answers keepalives on one stream in order, so the oldest send time is this answer's.
    const sentAt = this.#sentAt.shift();
    if (sentAt === undefined || this.isLost) return;
    if (!this.transport.checkHeader(header)) return;
    const seconds = Number(ttl);
    if (!(seconds > 0)) {
      // A member that just woke from a pause (or was cut off) can answer from a stale view and
      // call a live lease expired. Ask again on fresh streams (each may reach another member)
      // before believing it; the local deadline still bounds how long this can take.
      if (++this.#goneAnswers < GONE_CONFIRMATIONS) {
        this.#dropStream();
        this.clock.setTimeout(() => void this.#openStream(), CONFIRM_DELAY_MS);
        return;
      }
      this.#lose(
        new LeaseLostError(
          'gone',
          this.leaseId,
          `etcd reports lease ${this.leaseId.toString(16)} no longer exists (TTL ${ttl}): it expired or was revoked`,
        ),
      );
      return;
    }
    this.#goneAnswers = 0;
    this.#deadline.answered(sentAt, seconds);
    this.#armDeadline();
  }

  /**
   * Stops using the current stream. `stuck` cancels it, which also makes the client treat that
   * member as failing (its circuit breaker counts it); otherwise the stream is half-closed
   * gracefully, so a healthy member is not blamed.
   */
  #dropStream(stuck = false): void {
    const stream = this.#stream;
    this.#stream = undefined;
    try {
      if (stuck) stream?.cancel();
      else stream?.end();
    } catch {
      // already broken; it is being replaced or discarded either way
    }
  }

  #lose(reason: LeaseLostError): void {
    if (!this.#latch.trip(reason)) return;
    this.#cancelDeadline();
    clearInterval(this.#keepAliveTimer);
    for (const d of this.#disposables.splice(0)) d[Symbol.dispose]();
    this.#dropStream();
    // A session that only lost touch may still own its lease on the server: revoke it so its
    // locks pass to the next holder now instead of at expiry. Never after a cluster change,
    // where the same lease id may belong to someone else.
    if (reason.reason === 'deadline') void this.#revoke(this.transport.options.callTimeoutMs);
  }
}

export function assertSession(value: unknown): Session {
  if (!(value instanceof Session)) {
    throw new InvalidArgumentError('session must be a Session created by client.session()');
  }
  return value;
}
