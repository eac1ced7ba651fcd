/**
 * Every error leasehold throws extends {@link LeaseholdError}: it has a stable `code`, a `name`
 * equal to its class name, and the underlying failure as `cause`.
 *
 * Use the `isX(err)` guards rather than `instanceof`: they check a brand registered with
 * `Symbol.for`, so they keep working when two copies of the package are installed.
 */
const BRAND = Symbol.for('leasehold.error');

export type LeaseholdErrorCode =
  | 'INVALID_ARGUMENT'
  | 'CONNECT_FAILED'
  | 'ETCD_UNAVAILABLE'
  | 'LEASE_LOST'
  | 'CLUSTER_CHANGED'
  | 'SESSION_CLOSED'
  | 'LOCK_TAKEN'
  | 'LOCK_LOST'
  | 'LOCK_RELEASED'
  | 'NOT_LEADER';

export class LeaseholdError extends Error {
  declare readonly code: LeaseholdErrorCode;

  constructor(code: LeaseholdErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    Object.defineProperty(this, 'code', { value: code, enumerable: true });
    Object.defineProperty(this, BRAND, { value: code });
    this.name = new.target.name;
  }
}

function hasCode(err: unknown, code?: LeaseholdErrorCode): err is LeaseholdError {
  if (typeof err !== 'object' || err === null || !(BRAND in err)) return false;
  return code === undefined || (err as Record<symbol, unknown>)[BRAND] === code;
}

/** Bad input: the message names the value and what is allowed. Thrown where the call is made. */
export class InvalidArgumentError extends LeaseholdError {
  constructor(message: string) {
    super('INVALID_ARGUMENT', message);
  }
}

/** No endpoint answered within the dial timeout. */
export class ConnectError extends LeaseholdError {
  constructor(
    message: string,
    readonly endpoints: readonly string[],
    options?: { cause?: unknown },
  ) {
    super('CONNECT_FAILED', message, options);
  }
}

/** An etcd call failed after its deadline and any retries that were safe to make. */
export class EtcdUnavailableError extends LeaseholdError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ETCD_UNAVAILABLE', message, options);
  }
}

/** Why a session stopped being trustworthy. */
export type LeaseLostReason = 'deadline' | 'expired' | 'revoked' | 'cluster-changed' | 'closed';

/**
 * The session's lease can no longer be trusted to be alive. `reason` says why:
 * - `deadline`: no keepalive answer arrived before the local deadline;
 * - `expired`: etcd answered TTL <= 0 or "lease not found";
 * - `revoked`: the lease was revoked by someone else;
 * - `cluster-changed`: a response came from a different etcd cluster ({@link ClusterChangedError});
 * - `closed`: the session was closed by its owner ({@link SessionClosedError}).
 */
export class LeaseLostError extends LeaseholdError {
  constructor(
    readonly reason: LeaseLostReason,
    readonly leaseId: bigint,
    message: string,
    options?: { cause?: unknown },
    code: LeaseholdErrorCode = 'LEASE_LOST',
  ) {
    super(code, message, options);
  }
}

/** The session was closed by its owner. A {@link LeaseLostError} with reason `closed`. */
export class SessionClosedError extends LeaseLostError {
  constructor(leaseId: bigint) {
    super('closed', leaseId, `session for lease ${leaseId.toString(16)} was closed`, undefined, 'SESSION_CLOSED');
  }
}

/**
 * etcd answered with a different cluster id than on first contact: the cluster was rebuilt or
 * restored from a snapshot, revisions restarted, and tokens from it would not be comparable.
 */
export class ClusterChangedError extends LeaseLostError {
  constructor(
    leaseId: bigint,
    readonly expectedClusterId: string,
    readonly actualClusterId: string,
  ) {
    super(
      'cluster-changed',
      leaseId,
      `etcd cluster id changed from ${expectedClusterId} to ${actualClusterId}: the cluster was rebuilt or restored, so revisions (fencing tokens) restarted; this session stops issuing tokens`,
      undefined,
      'CLUSTER_CHANGED',
    );
  }
}

export const isLeaseholdError = (err: unknown): err is LeaseholdError => hasCode(err);
export const isInvalidArgumentError = (err: unknown): err is InvalidArgumentError =>
  hasCode(err, 'INVALID_ARGUMENT');
export const isLeaseLostError = (err: unknown): err is LeaseLostError =>
  hasCode(err, 'LEASE_LOST') || hasCode(err, 'SESSION_CLOSED') || hasCode(err, 'CLUSTER_CHANGED');
export const isClusterChangedError = (err: unknown): err is ClusterChangedError =>
  hasCode(err, 'CLUSTER_CHANGED');
export const isConnectError = (err: unknown): err is ConnectError => hasCode(err, 'CONNECT_FAILED');
