/**
 * The one place that talks to etcd3. Everything above it sees plain data and leasehold errors.
 *
 * Policy decided here:
 * - every unary call carries a gRPC deadline, so a frozen member costs one timeout, not a hang;
 * - only calls marked idempotent are retried (jittered exponential backoff, a few attempts); a
 *   txn that timed out may have been applied, so a non-idempotent one is re-sent only when the
 *   request provably never left this process;
 * - each attempt has a deadline of its own (`attemptTimeoutMs`, within the call's), and a
 *   member that let an attempt hang rests while the others serve (see `Members`), so a frozen
 *   member or a dead leader costs a call about one attempt, not `callTimeoutMs`; a member that
 *   reset its connection is tried again after 250 ms (etcd3's default rests it 5 s);
 * - cluster identity: every answer must carry the cluster id seen at connect, and a linearizable
 *   answer must not carry a revision below the highest one known when its request was sent (a
 *   snapshot restore with the same member settings keeps the cluster id but rewinds revisions).
 *   Either breach ends the client for good with {@link ClusterChangedError}, and the answer is
 *   never handed on;
 * - streams are tracked, so `close()` leaves nothing running.
 */
import {
  ExponentialBackoff,
  handleWhen,
  isBrokenCircuitError,
  noop,
  retry,
  type IPolicy,
} from 'cockatiel';
import {
  Etcd3,
  GRPCDeadlineExceededError,
  isRecoverableError,
  type IOptions,
  type IRangeRequest,
  type IRangeResponse,
  type IResponseHeader,
  type ITxnRequest,
  type ITxnResponse,
} from 'etcd3';
import {
  AuthError,
  ClientClosedError,
  ClusterChangedError,
  EtcdRequestError,
  EtcdUnavailableError,
  isLeaseholdError,
  type LeaseholdError,
} from './errors.js';
import { raceSignal, sleep, timeoutSignal, type Clock } from './clock.js';
import { describeRanges, PERMISSION_DENIED, permissionDenied, rangesOfTxn } from './denied.js';
import { connectFailure, tlsFailureOf } from './tls-failure.js';
import { Listeners } from './latch.js';
import { Members } from './members.js';
import { endpointOf, logRetries, watchMember } from './endpoint.js';
import { telemetryOf, type Telemetry } from './telemetry.js';
import { tunables, type AuthOptions, type TlsOptions } from './options.js';

export interface EtcdOptions {
  clock: Clock;
  endpoints: string[];
  dialTimeoutMs: number;
  callTimeoutMs: number;
  maxAttempts: number;
  /** Deadline of one attempt on one member (at most `callTimeoutMs`). */
  attemptTimeoutMs: number;
  tls?: TlsOptions | undefined;
  auth?: AuthOptions | undefined;
  /** Where logs, metrics and spans go. */
  telemetry?: Telemetry | undefined;
}

/** A gRPC stream as the SDK uses it: etcd3's duplex stream. */
export interface Stream<Req, Res> {
  write(item: Req): void;
  end(): void;
  cancel(): void;
  on(event: 'data', fn: (item: Res) => void): unknown;
  on(event: 'error', fn: (err: Error) => void): unknown;
  on(event: 'end', fn: () => void): unknown;
}

const isRetryable = (err: Error) => isRecoverableError(err) || isBrokenCircuitError(err);

/** Failures that prove the request never left: an open circuit, or a refused connection. */
const wasNotSent = (err: Error) =>
  isBrokenCircuitError(err) ||
  (isRecoverableError(err) && err.message.includes('No connection established'));

/** etcd refused a token it once issued: it expired unused, or the auth store changed since. */
const STALE_TOKEN = /invalid auth token|revision of auth store is old/i;

/** The part of etcd3's connection pool that caches the auth token. */
interface Pool {
  authenticator?: { invalidateMetadata?(): void };
}

const AUTH_FAILURE =
  /authentication failed|user name is empty|user name not found|invalid auth token|auth: revision|authentication is not enabled/i;

/** Where background clean-up reports what failed. */
export type Report = (error: LeaseholdError) => void;

/** etcd did not answer: worth trying again later. */
const isTransient = (err: unknown): boolean =>
  isLeaseholdError(err) && err.code === 'ETCD_UNAVAILABLE';

/** The client is closed or met another cluster: nothing more can be done through it. */
export const isEnded = (err: unknown): boolean =>
  isLeaseholdError(err) && (err.code === 'CLIENT_CLOSED' || err.code === 'CLUSTER_CHANGED');

/**
 * Clean-up that must happen even while etcd is away (a revoke, a key removal): runs `once` (a
 * single call, one deadline: whoever awaits this waits at most that long) and returns; if that
 * failed transiently, reports it once and keeps retrying in the background (backoff up to
 * `retryMaxMs`) until it succeeds, `moot(err)` says it no longer matters, the client ends,
 * `giveUp()` says stop, or etcd refuses outright (reported).
 */
export async function cleanUp(
  clock: Clock,
  report: Report,
  what: string,
  once: (attempt: number) => Promise<unknown>,
  moot: (err?: unknown) => boolean = () => false,
  giveUp: () => boolean = () => false,
): Promise<void> {
  const attempt = async (n: number): Promise<boolean> => {
    if (moot()) return true;
    try {
      await once(n);
      return true;
    } catch (err) {
      if (moot(err) || isEnded(err)) return true;
      if (isTransient(err) && !giveUp()) return false;
      report(err as LeaseholdError);
      return true;
    }
  };
  if (await attempt(0)) return;
  report(new EtcdUnavailableError(`etcd ${what} failed; retrying in the background`));
  void (async () => {
    for (let n = 1, delay = tunables.retryMinMs as number; ; n++) {
      await sleep(clock, delay);
      if (await attempt(n)) return;
      delay = Math.min(delay * 2, tunables.retryMaxMs);
    }
  })();
}

/** Stops using a stream: cancelled if stuck (its member is then marked failing), else ended. */
export function endStream(
  stream: { end(): void; cancel(): void } | undefined,
  stuck: boolean,
): void {
  try {
    if (stuck) stream?.cancel();
    else stream?.end();
  } catch {
    // already broken
  }
}

/** First key after every key that starts with `prefix`: the end of a prefix range. */
export function prefixEnd(prefix: string): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // all 0xff: etcd's "to the end of the keyspace"
}

export class Etcd {
  readonly client: Etcd3;
  #clusterId = '';
  /** Highest header revision seen on any answer: every one of them was committed. */
  #revision = 0n;
  /** Highest raft term seen on any answer. */
  #term = 0n;
  #changed: ClusterChangedError | undefined;
  #closed = false;
  #answers = 0;
  readonly #onChanged = new Listeners<ClusterChangedError>();
  readonly #streams = new Set<Stream<unknown, unknown>>();
  readonly #retry: IPolicy;
  readonly #retryUnsent: IPolicy;
  readonly #members: Members;

  private constructor(readonly options: EtcdOptions) {
    const pem = (v: Buffer | string | undefined) => (v === undefined ? undefined : Buffer.from(v));
    const members = (this.#members = new Members(options.clock));
    const etcdOptions: IOptions = {
      hosts: options.endpoints,
      dialTimeout: options.dialTimeoutMs,
      faultHandling: {
        // etcd3 only ever calls `execute` on a member's policy.
        host: (endpoint: string) =>
          watchMember(endpoint, members.add(endpoint), telemetryOf(this).log) as unknown as IPolicy,
        global: noop,
        watchBackoff: new ExponentialBackoff().next(), // unused: the SDK runs its own watch
      },
      grpcOptions: {
        // grpc-js backs off reconnects up to 2 minutes by default; a healed network must be
        // usable again within a second.
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 1_000,
      },
    };
    if (options.tls) {
      etcdOptions.credentials = {
        rootCertificate: pem(options.tls.caCert)!,
        ...(options.tls.clientKey ? { privateKey: pem(options.tls.clientKey) } : {}),
        ...(options.tls.clientCert ? { certChain: pem(options.tls.clientCert) } : {}),
      };
    }
    if (options.auth) etcdOptions.auth = { ...options.auth };
    this.client = new Etcd3(etcdOptions);
    const backoff = new ExponentialBackoff({
      initialDelay: tunables.retryMinMs,
      maxDelay: tunables.retryMaxMs,
    });
    const maxAttempts = options.maxAttempts - 1;
    this.#retry = retry(handleWhen(isRetryable), { maxAttempts, backoff });
    this.#retryUnsent = retry(handleWhen(wasNotSent), { maxAttempts, backoff });
  }

  /**
   * Opens the client and keeps trying `probe` (a read under the SDK's own prefix, so that
   * missing credentials or permissions fail here) until it answers or the dial timeout passes.
   */
  static async open(options: EtcdOptions, probeKey: string, signal?: AbortSignal): Promise<Etcd> {
    const etcd = new Etcd(options);
    const probe = logRetries(telemetryOf(etcd).log, options.clock, 'connect', (ms: number) =>
      etcd.client.kv.range(
        { key: Buffer.from(probeKey), range_end: prefixEnd(probeKey), count_only: true },
        { deadline: Date.now() + ms },
      ),
    );
    const giveUpAt = options.clock.now() + options.dialTimeoutMs;
    // Between dials no socket is open: without this the process could exit mid-connect.
    const release = options.clock.hold();
    const probeKeys = () => describeRanges([{ key: probeKey, range_end: prefixEnd(probeKey) }]);
    let tls: ReturnType<typeof tlsFailureOf>; // the latest TLS failure of any attempt
    try {
      for (
        let delay: number = tunables.retryMinMs;
        ;
        delay = Math.min(delay * 2, tunables.retryMaxMs)
      ) {
        // One attempt per member at a time (a frozen member must not take the whole dial time);
        // the attempt made at the dial deadline still gets a short deadline of its own, so the
        // last word is an answer (or a refusal) rather than a timer.
        const timeoutMs = Math.max(
          tunables.retryMinMs,
          Math.min(options.attemptTimeoutMs, giveUpAt - options.clock.now()),
        );
        const started = probe(timeoutMs);
        try {
          const res = signal ? await raceSignal(started, signal) : await started;
          etcd.#clusterId = res.header.cluster_id;
          etcd.#revision = BigInt(res.header.revision);
          etcd.#term = BigInt(res.header.raft_term);
          return etcd;
        } catch (err) {
          signal?.throwIfAborted();
          const error = etcd.#wrap('connect', err, timeoutMs, undefined, probeKeys);
          if (error.code !== 'ETCD_UNAVAILABLE') throw error; // refused: retrying will not help
          tls = tlsFailureOf(err) ?? tls;
          if (options.clock.now() >= giveUpAt) {
            // A TLS failure is reported as such even if the last attempt only timed out.
            throw await connectFailure(options, error.message, err, tls);
          }
        }
        // Never give up early: a back-off that would pass the deadline is cut short, and one
        // more attempt is made at the deadline itself.
        await sleep(options.clock, Math.min(delay, giveUpAt - options.clock.now()), signal);
      }
    } catch (err) {
      etcd.close();
      throw err;
    } finally {
      release();
    }
  }

  get clusterId(): string {
    return this.#clusterId;
  }

  /** How many answers have arrived so far: "has etcd answered since?" for give-up rules. */
  get answers(): number {
    return this.#answers;
  }

  /** Tells `listener` once the client has met another cluster (or a rewound history). */
  onChanged(listener: (error: ClusterChangedError) => void): Disposable {
    return this.#onChanged.add(listener);
  }

  /** Throws if the client is closed or has met another cluster. */
  assertUsable(): void {
    if (this.#changed) throw this.#changed;
    if (this.#closed) throw new ClientClosedError();
  }

  /**
   * Runs one unary call with a deadline (`timeoutMs`, default `callTimeoutMs`) and checks the
   * answer's header. `idempotent`: safe to send twice (reads, guarded txns, revoke), so retried
   * up to `maxAttempts` times, unless `once` (a caller that retries by itself and must stay
   * within one deadline).
   */
  async call<T extends { header?: IResponseHeader }>(
    what: string,
    run: (options: { deadline: number }) => Promise<T>,
    opts: {
      idempotent: boolean;
      timeoutMs?: number | undefined;
      once?: boolean;
      /** The keys the call touches, for a permission denial's message (only built then). */
      keys?: () => string;
    },
  ): Promise<T> {
    this.assertUsable();
    const known = { revision: this.#revision, term: this.#term };
    const timeoutMs = opts.timeoutMs ?? this.options.callTimeoutMs;
    const attemptMs = Math.min(timeoutMs, this.options.attemptTimeoutMs);
    const attempt = logRetries(telemetryOf(this).log, this.options.clock, what, () =>
      run({ deadline: Date.now() + attemptMs }),
    );
    let res: T;
    try {
      if (opts.once) res = await attempt();
      else res = await (opts.idempotent ? this.#retry : this.#retryUnsent).execute(attempt);
    } catch (err) {
      const limit = attemptMs < timeoutMs ? 'per attempt' : undefined;
      throw this.#wrap(what, err, attemptMs, limit, opts.keys);
    }
    this.observe(res.header, known);
    return res;
  }

  /** A KV txn through {@link call}. */
  txn(
    what: string,
    request: ITxnRequest,
    opts: { idempotent: boolean; once?: boolean },
  ): Promise<ITxnResponse> {
    const keys = () => describeRanges(rangesOfTxn(request));
    return this.call(what, (o) => this.client.kv.txn(request, o), { ...opts, keys });
  }

  /** A linearizable KV range through {@link call} (retried: reads are idempotent). */
  range(what: string, request: IRangeRequest): Promise<IRangeResponse> {
    const keys = () => describeRanges([request]);
    return this.call(what, (o) => this.client.kv.range(request, o), { idempotent: true, keys });
  }

  /**
   * Checks an answer's header: the cluster id always, and for a linearizable answer (pass what
   * was known when its request was sent) that history did not go backwards: neither its revision
   * nor its raft term may be lower. A member can only answer linearizably at the cluster's
   * current term, and terms never drop in one cluster's life, but a snapshot restore brings the
   * old term back (and a restored history can catch up with the revision first). Stream answers
   * (keepalive, watch) may come from a lagging member, so only their cluster id is checked.
   * Throws {@link ClusterChangedError} on a breach, after telling every listener.
   */
  observe(header: IResponseHeader | undefined, known?: { revision: bigint; term: bigint }): void {
    this.assertUsable();
    if (!header) return;
    const [revision, term] = [BigInt(header.revision), BigInt(header.raft_term)];
    let detail: string | undefined;
    if (header.cluster_id !== this.#clusterId) {
      detail = `it answered with cluster id ${header.cluster_id}, not ${this.#clusterId} as at connect (rebuilt cluster or a foreign member)`;
    } else if (known && (revision < known.revision || term < known.term)) {
      detail = `a linearizable answer carried revision ${revision} and raft term ${term} after revision ${known.revision} and term ${known.term} had been seen (restored from a snapshot?)`;
    }
    if (detail !== undefined) {
      this.#changed = new ClusterChangedError(0n, detail);
      this.#onChanged.emit(this.#changed);
      this.#onChanged.clear();
      throw this.#changed;
    }
    if (revision > this.#revision) this.#revision = revision;
    if (term > this.#term) this.#term = term;
    this.#answers++;
  }

  /**
   * Opens a stream on one member within `attemptTimeoutMs` (opening may authenticate first, on a
   * member that may be frozen); `close()` cancels every stream still open.
   */
  async stream<Req, Res>(
    open: (client: Etcd3) => Promise<Stream<Req, Res>>,
  ): Promise<Stream<Req, Res>> {
    this.assertUsable();
    const ms = this.attemptTimeoutMs;
    const opening = open(this.client);
    const bound = timeoutSignal(this.options.clock, ms, () =>
      this.#wrap('stream open', new GRPCDeadlineExceededError(), ms),
    );
    let stream: Stream<Req, Res>;
    try {
      stream = await raceSignal(opening, bound.signal);
    } catch (err) {
      void opening.then(
        (late) => endStream(late, true),
        () => {},
      );
      throw this.#wrap('stream open', err, ms);
    } finally {
      bound[Symbol.dispose]();
    }
    if (this.#closed) endStream(stream, true);
    this.assertUsable();
    const tracked = stream as unknown as Stream<unknown, unknown>;
    this.#streams.add(tracked);
    const untrack = () => void this.#streams.delete(tracked);
    stream.on('error', untrack);
    stream.on('end', untrack);
    if (this.options.auth) {
      // etcd3 renews an expired token for unary calls only. A watch created on a stream opened
      // with a stale token is cancelled with "invalid auth token", and every reopen would send
      // the same token until some unary call happened to renew it: drop it, so the next open
      // authenticates again.
      const stale = (reason: unknown) => typeof reason === 'string' && STALE_TOKEN.test(reason);
      stream.on('data', (res) => {
        if (stale((res as { cancel_reason?: unknown }).cancel_reason)) this.#forgetToken();
      });
      stream.on('error', (err) => stale(err.message) && this.#forgetToken());
    }
    return stream;
  }

  /**
   * `stream` went unanswered past its deadline: its member rests at once (see `Members`), so
   * neither the stream opened in its place nor the next call goes there. Call before cancelling.
   */
  stuck(stream: object): void {
    this.#members.stuck(endpointOf(stream));
  }

  /** `stream` was answered: its member is alive and has a leader (see `Members`). */
  answered(stream: object): void {
    this.#members.answered(endpointOf(stream));
  }

  /** How long one attempt on one member may take: also how long a stream may stay unanswered. */
  get attemptTimeoutMs(): number {
    return Math.min(this.options.callTimeoutMs, this.options.attemptTimeoutMs);
  }

  /** Makes etcd3 authenticate again before its next call or stream. */
  #forgetToken(): void {
    const pool = (this.client as unknown as { pool?: Pool }).pool;
    pool?.authenticator?.invalidateMetadata?.();
  }

  #wrap(
    what: string,
    err: unknown,
    timeoutMs: number,
    limit = 'callTimeoutMs',
    keys?: () => string,
  ): LeaseholdError {
    if (isLeaseholdError(err)) return err;
    if (this.#closed) return new ClientClosedError();
    const e = err instanceof Error ? err : new Error(String(err));
    const [at, cause] = [this.options.endpoints.join(', '), { cause: err }];
    if (AUTH_FAILURE.test(e.message)) {
      const fix = /not enabled/i.test(e.message)
        ? 'etcd has authentication disabled: leave out the auth option, or enable it on etcd (etcdctl auth enable)'
        : 'check auth.username and auth.password (etcd has authentication enabled)';
      return new AuthError(
        `etcd at ${at} refused the credentials for ${what}: ${e.message}; ${fix}`,
        cause,
      );
    }
    const unavailable = (why: string) =>
      new EtcdUnavailableError(`etcd ${what} failed: ${why}`, cause);
    if (isBrokenCircuitError(e)) {
      return unavailable(
        `every member (${at}) failed its last calls and rests ${tunables.breakerHalfOpenMs} ms before it is tried again`,
      );
    }
    if (e instanceof GRPCDeadlineExceededError) {
      return unavailable(`no answer from ${at} within ${timeoutMs} ms (${limit})`);
    }
    if (isRecoverableError(e) && !/too large|larger than max/i.test(e.message)) {
      return unavailable(`could not reach etcd at ${at} (${e.message})`);
    }
    if (PERMISSION_DENIED.test(e.message)) return permissionDenied(what, at, keys?.(), err);
    return new EtcdRequestError(`etcd ${what} was refused by ${at}: ${e.message}`, cause);
  }

  /** Cancels every open stream and closes the connections. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const stream of this.#streams) endStream(stream, true);
    this.#onChanged.clear();
    this.client.close();
  }
}
