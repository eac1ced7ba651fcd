/**
 * The one place that talks to etcd3. Everything above it sees plain data and leasehold errors.
 *
 * Policy decisions made here:
 * - every unary call carries a gRPC deadline, so a frozen member costs one timeout, not a hang;
 * - only calls marked idempotent are retried (with jittered exponential backoff, a few attempts);
 *   a txn that timed out may have been applied, so re-sending a non-idempotent one is unsafe;
 * - each member sits behind a circuit breaker that half-opens after 250 ms, so a member that
 *   reset its connection is tried again almost at once (etcd3's default waits 5 s);
 * - every response header is checked against the cluster id seen at connect.
 */
import {
  ConsecutiveBreaker,
  ExponentialBackoff,
  circuitBreaker,
  handleWhen,
  isBrokenCircuitError,
  noop,
  retry,
  type IPolicy,
} from 'cockatiel';
import {
  Etcd3,
  isRecoverableError,
  type IOptions,
  type IResponseHeader,
  type IRequestStream,
  type IResponseStream,
  type ILeaseKeepAliveRequest,
  type ILeaseKeepAliveResponse,
} from 'etcd3';
import {
  ConnectError,
  EtcdRequestError,
  EtcdUnavailableError,
  isLeaseholdError,
} from './errors.js';
import type { AuthOptions, TlsOptions } from './options.js';

export interface TransportOptions {
  endpoints: string[];
  dialTimeoutMs: number;
  callTimeoutMs: number;
  maxAttempts: number;
  tls?: TlsOptions | undefined;
  auth?: AuthOptions | undefined;
}

export type KeepAliveStream = IRequestStream<ILeaseKeepAliveRequest> &
  IResponseStream<ILeaseKeepAliveResponse>;

const isTransient = (err: Error) => isRecoverableError(err) || isBrokenCircuitError(err);

/**
 * Failures that prove the request never left this process: an open circuit, or gRPC's "no
 * connection established" (the member refused the connection). Those are safe to retry even
 * for writes that are not idempotent.
 */
const wasNotSent = (err: Error) =>
  isBrokenCircuitError(err) ||
  (isRecoverableError(err) && err.message.includes('No connection established'));

export class EtcdTransport {
  readonly client: Etcd3;
  #clusterId: string | undefined;
  readonly #clusterListeners = new Set<(expected: string, actual: string) => void>();
  readonly #retry: IPolicy;
  readonly #retryUnsent: IPolicy;

  private constructor(readonly options: TransportOptions) {
    const toBuffer = (v: Buffer | string | undefined) =>
      v === undefined ? undefined : Buffer.isBuffer(v) ? v : Buffer.from(v);
    const etcdOptions: IOptions = {
      hosts: options.endpoints,
      dialTimeout: options.dialTimeoutMs,
      faultHandling: {
        host: () =>
          circuitBreaker(handleWhen(isTransient), {
            halfOpenAfter: 250,
            breaker: new ConsecutiveBreaker(3),
          }),
        global: noop,
        // etcd3 wants a started backoff (it calls next() on it), not a factory.
        watchBackoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 1_000 }).next(),
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
        rootCertificate: toBuffer(options.tls.caCert)!,
        ...(options.tls.clientKey ? { privateKey: toBuffer(options.tls.clientKey) } : {}),
        ...(options.tls.clientCert ? { certChain: toBuffer(options.tls.clientCert) } : {}),
      };
    }
    if (options.auth) etcdOptions.auth = { ...options.auth };
    this.client = new Etcd3(etcdOptions);
    const backoff = new ExponentialBackoff({ initialDelay: 50, maxDelay: 1_000 });
    this.#retry = retry(handleWhen(isTransient), { maxAttempts: options.maxAttempts - 1, backoff });
    this.#retryUnsent = retry(handleWhen(wasNotSent), {
      maxAttempts: options.maxAttempts - 1,
      backoff,
    });
  }

  /** Opens the client and waits for the first answer, within the dial timeout. */
  static async open(options: TransportOptions): Promise<EtcdTransport> {
    const transport = new EtcdTransport(options);
    try {
      const status = await transport.client.maintenance.status({
        deadline: Date.now() + options.dialTimeoutMs,
      });
      transport.#clusterId = status.header.cluster_id;
      return transport;
    } catch (err) {
      transport.client.close();
      throw new ConnectError(
        `could not reach etcd at ${options.endpoints.join(', ')} within ${options.dialTimeoutMs} ms (dialTimeoutMs): ${(err as Error).message}`,
        options.endpoints,
        { cause: err },
      );
    }
  }

  get clusterId(): string {
    return this.#clusterId ?? '';
  }

  onClusterChanged(listener: (expected: string, actual: string) => void): Disposable {
    this.#clusterListeners.add(listener);
    return { [Symbol.dispose]: () => void this.#clusterListeners.delete(listener) };
  }

  /** Checks a response header; returns false (and tells listeners) if it is from another cluster. */
  checkHeader(header: IResponseHeader | undefined): boolean {
    if (!header || this.#clusterId === undefined || header.cluster_id === this.#clusterId) {
      return true;
    }
    for (const listener of [...this.#clusterListeners])
      listener(this.#clusterId, header.cluster_id);
    return false;
  }

  /**
   * Runs one unary etcd call with a deadline. `idempotent` calls are retried on transient
   * failures; others only when the request provably never left (a timed-out write may still
   * have been applied).
   */
  async call<T extends { header?: IResponseHeader }>(
    what: string,
    run: (options: { deadline: number }) => Promise<T>,
    opts: { idempotent: boolean; timeoutMs?: number },
  ): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? this.options.callTimeoutMs;
    const once = () => run({ deadline: Date.now() + timeoutMs });
    try {
      const res = await (opts.idempotent ? this.#retry : this.#retryUnsent).execute(once);
      this.checkHeader(res.header);
      return res;
    } catch (err) {
      throw this.#wrapError(what, err);
    }
  }

  #wrapError(what: string, err: unknown): Error {
    if (isLeaseholdError(err)) return err;
    const message = `etcd ${what} failed: ${(err as Error)?.message ?? String(err)}`;
    return err instanceof Error && isTransient(err)
      ? new EtcdUnavailableError(message, { cause: err })
      : new EtcdRequestError(message, { cause: err });
  }

  openKeepAlive(): Promise<KeepAliveStream> {
    return this.client.leaseClient.leaseKeepAlive();
  }

  close(): void {
    this.client.close();
    this.#clusterListeners.clear();
  }
}
