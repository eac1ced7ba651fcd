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
 * - cluster identity (see `Identity`): an answer from another cluster, or a linearizable one from
 *   a rewound history (a snapshot restore), ends the client for good with
 *   {@link ClusterChangedError}, and is never handed on;
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
import { raceSignal, sleep, timeoutSignal, type Clock } from '../clock.js';
import { ClientClosedError, type ClusterChangedError, type LeaseholdError } from '../errors.js';
import { prefixEnd } from '../keys.js';
import { tunables, type AuthOptions, type TlsOptions } from '../options.js';
import type { Telemetry } from '../telemetry.js';
import { connectFailure, describeRanges, diagnose, rangesOfTxn, tlsFailureOf } from './diagnose.js';
import { Identity } from './identity.js';
import { endpointOf, logRetries, Members } from './members.js';
import type { Stream, WireClient } from './wire.js';

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
  telemetry: Telemetry;
  /** An etcd that is not a gRPC connection (see wire.ts); `endpoints` then only name it. */
  client?: WireClient | undefined;
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

export class Etcd {
  readonly client: Etcd3;
  readonly #identity = new Identity();
  #closed = false;
  readonly #streams = new Set<Stream<unknown, unknown>>();
  readonly #retry: IPolicy;
  readonly #retryUnsent: IPolicy;
  readonly #members: Members;

  private constructor(readonly options: EtcdOptions) {
    const pem = (v: Buffer | string | undefined) => (v === undefined ? undefined : Buffer.from(v));
    const log = options.telemetry.log;
    const members = (this.#members = new Members(options.clock, undefined, log));
    const etcdOptions: IOptions = {
      hosts: options.endpoints,
      dialTimeout: options.dialTimeoutMs,
      faultHandling: {
        // etcd3 only ever calls `execute` on a member's policy.
        host: (endpoint: string) => members.add(endpoint) as unknown as IPolicy,
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
    // A wire client answers the calls the SDK makes with etcd3's own shapes and errors.
    this.client = (options.client as Etcd3 | undefined) ?? new Etcd3(etcdOptions);
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
    const range = { key: Buffer.from(probeKey), range_end: prefixEnd(probeKey) };
    const probe = logRetries(options.telemetry.log, options.clock, 'connect', (ms: number) =>
      etcd.client.kv.range({ ...range, count_only: true }, { deadline: Date.now() + ms }),
    );
    const giveUpAt = options.clock.now() + options.dialTimeoutMs;
    // Between dials no socket is open: without this the process could exit mid-connect.
    const release = options.clock.hold();
    const probeKeys = () => describeRanges([range]);
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
          etcd.#identity.start(res.header);
          return etcd;
        } catch (err) {
          signal?.throwIfAborted();
          const error = etcd.#diagnose('connect', err, timeoutMs, undefined, probeKeys);
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
    return this.#identity.clusterId;
  }

  /** How many answers have arrived so far: "has etcd answered since?" for give-up rules. */
  get answers(): number {
    return this.#identity.answers;
  }

  /** Where this client's logs, metrics and spans go. */
  get telemetry(): Telemetry {
    return this.options.telemetry;
  }

  /** Tells `listener` once the client has met another cluster (or a rewound history). */
  onChanged(listener: (error: ClusterChangedError) => void): Disposable {
    return this.#identity.onChanged(listener);
  }

  /** Throws if the client is closed or has met another cluster. */
  assertUsable(): void {
    const changed = this.#identity.changed;
    if (changed) throw changed;
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
    const known = this.#identity.known();
    const timeoutMs = opts.timeoutMs ?? this.options.callTimeoutMs;
    const attemptMs = Math.min(timeoutMs, this.options.attemptTimeoutMs);
    const attempt = logRetries(this.telemetry.log, this.options.clock, what, () =>
      run({ deadline: Date.now() + attemptMs }),
    );
    let res: T;
    try {
      if (opts.once) res = await attempt();
      else res = await (opts.idempotent ? this.#retry : this.#retryUnsent).execute(attempt);
    } catch (err) {
      const limit = attemptMs < timeoutMs ? 'per attempt' : undefined;
      throw this.#diagnose(what, err, attemptMs, limit, opts.keys);
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

  /** Checks an answer's header, as `Identity.check` (`known` only for a linearizable answer). */
  observe(header: IResponseHeader | undefined, known?: { revision: bigint; term: bigint }): void {
    this.assertUsable();
    if (header) this.#identity.check(header, known);
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
      this.#diagnose('stream open', new GRPCDeadlineExceededError(), ms),
    );
    let stream: Stream<Req, Res>;
    try {
      stream = await raceSignal(opening, bound.signal);
    } catch (err) {
      void opening.then(
        (late) => endStream(late, true),
        () => {},
      );
      throw this.#diagnose('stream open', err, ms);
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
    (this.client as unknown as { pool?: Pool }).pool?.authenticator?.invalidateMetadata?.();
  }

  #diagnose(
    what: string,
    err: unknown,
    timeoutMs: number,
    limit?: string,
    keys?: () => string,
  ): LeaseholdError {
    const { endpoints } = this.options;
    return diagnose(what, err, { endpoints, closed: this.#closed, timeoutMs, limit, keys });
  }

  /** Cancels every open stream and closes the connections. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const stream of this.#streams) endStream(stream, true);
    this.#identity.close();
    this.client.close();
  }
}
