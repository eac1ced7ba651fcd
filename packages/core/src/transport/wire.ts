/**
 * The part of etcd3's client the SDK calls, as plain data: what an etcd other than a gRPC
 * connection (the in-memory one of `@leasehold/testing`) implements to run under the SDK's real
 * logic. Everything above `Etcd` keeps seeing the same requests, answers and failures.
 */
import {
  EtcdError,
  EtcdLeaseInvalidError,
  GRPCDeadlineExceededError,
  GRPCUnavailableError,
  type IDeleteRangeRequest,
  type IDeleteRangeResponse,
  type ILeaseGrantRequest,
  type ILeaseGrantResponse,
  type ILeaseKeepAliveRequest,
  type ILeaseKeepAliveResponse,
  type ILeaseRevokeRequest,
  type ILeaseRevokeResponse,
  type ILeaseTimeToLiveRequest,
  type ILeaseTimeToLiveResponse,
  type IPutRequest,
  type IPutResponse,
  type IRangeRequest,
  type IRangeResponse,
  type ITxnRequest,
  type ITxnResponse,
  type IWatchRequest,
  type IWatchResponse,
} from 'etcd3';

export type {
  ICompare,
  IDeleteRangeRequest,
  IDeleteRangeResponse,
  IEvent,
  IKeyValue,
  ILeaseGrantResponse,
  ILeaseKeepAliveRequest,
  ILeaseKeepAliveResponse,
  ILeaseRevokeResponse,
  ILeaseTimeToLiveResponse,
  IPutRequest,
  IPutResponse,
  IRangeRequest,
  IRangeResponse,
  IRequestOp,
  IResponseHeader,
  IResponseOp,
  ITxnRequest,
  ITxnResponse,
  IWatchRequest,
  IWatchResponse,
} from 'etcd3';
/** A gRPC stream as the SDK uses it: etcd3's duplex stream. */
export interface Stream<Req, Res> {
  write(item: Req): void;
  end(): void;
  cancel(): void;
  on(event: 'data', fn: (item: Res) => void): unknown;
  on(event: 'error', fn: (err: Error) => void): unknown;
  on(event: 'end', fn: () => void): unknown;
}

/** A unary call's options: the attempt's deadline, in `Date.now()` milliseconds. */
export interface CallOptions {
  deadline?: number | Date;
}

export interface WireClient {
  kv: {
    range: (req: IRangeRequest, options?: CallOptions) => Promise<IRangeResponse>;
    txn: (req: ITxnRequest, options?: CallOptions) => Promise<ITxnResponse>;
    put: (req: IPutRequest, options?: CallOptions) => Promise<IPutResponse>;
    deleteRange: (req: IDeleteRangeRequest, options?: CallOptions) => Promise<IDeleteRangeResponse>;
  };
  leaseClient: {
    leaseGrant: (req: ILeaseGrantRequest, options?: CallOptions) => Promise<ILeaseGrantResponse>;
    leaseRevoke: (req: ILeaseRevokeRequest, options?: CallOptions) => Promise<ILeaseRevokeResponse>;
    leaseTimeToLive: (
      req: ILeaseTimeToLiveRequest,
      options?: CallOptions,
    ) => Promise<ILeaseTimeToLiveResponse>;
    leaseKeepAlive: () => Promise<Stream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>>;
  };
  watchClient: {
    watch: () => Promise<Stream<IWatchRequest, IWatchResponse>>;
  };
  close: () => void;
}

/** The failures the SDK tells apart, as etcd3 reports them. */
export const wireErrors = {
  /** Nothing answered: retried if idempotent, `EtcdUnavailableError` in the end. */
  unavailable: (detail: string): Error => new GRPCUnavailableError(`14 UNAVAILABLE: ${detail}`),
  /** The attempt's deadline passed unanswered. */
  deadline: (): Error => new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED: Deadline exceeded'),
  /** A write or keepalive named a lease etcd does not have. */
  leaseNotFound: (): Error =>
    new EtcdLeaseInvalidError('5 NOT_FOUND: etcdserver: requested lease not found'),
  /** etcd refused the request (`etcdserver: ...`): never retried. */
  refused: (message: string): Error => new EtcdError(message),
};
