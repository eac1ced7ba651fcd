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
  | 'ETCD_REQUEST_FAILED'
  | 'LEASE_LOST'
  | 'CLUSTER_CHANGED'
  | 'SESSION_CLOSED'
  | 'CLIENT_CLOSED'
  | 'LOCK_TAKEN'
  | 'LOCK_TIMEOUT'
  | 'LOCK_LOST'
  | 'LOCK_RELEASED';

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

/** etcd refused a request (permission denied, bad request, ...): retrying will not help. */
export class EtcdRequestError extends LeaseholdError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ETCD_REQUEST_FAILED', message, options);
  }
}

/** Why a session stopped being trustworthy. */
export type LeaseLostReason = 'deadline' | 'gone' | 'cluster-changed' | 'closed';

/**
 * The session's lease can no longer be trusted to be alive. `reason` says why:
 * - `deadline`: no keepalive answer arrived before the local deadline;
 * - `gone`: etcd answered TTL <= 0 / "lease not found": it expired on the server or someone
 *   else revoked it (etcd does not say which);
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
    super(
      'closed',
      leaseId,
      `session for lease ${leaseId.toString(16)} was closed`,
      undefined,
      'SESSION_CLOSED',
    );
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

/** The client was closed; make a new one with `connect()`. */
export class ClientClosedError extends LeaseholdError {
  constructor() {
    super('CLIENT_CLOSED', 'this leasehold client is closed; connect() again to make a new one');
  }
}

/** `tryAcquire` found the lock held. Says by whom: the holder's key and fencing token. */
export class LockTakenError extends LeaseholdError {
  constructor(
    readonly lockName: string,
    readonly holderKey: string,
    readonly holderToken: bigint,
  ) {
    super(
      'LOCK_TAKEN',
      `lock ${JSON.stringify(lockName)} is held by ${holderKey} (token ${holderToken})`,
    );
  }
}

/** `acquire` waited `timeoutMs` without getting the lock; its place in the queue was removed. */
export class LockTimeoutError extends LeaseholdError {
  constructor(
    readonly lockName: string,
    readonly timeoutMs: number,
  ) {
    super(
      'LOCK_TIMEOUT',
      `lock ${JSON.stringify(lockName)} was not acquired within ${timeoutMs} ms (timeoutMs)`,
    );
  }
}

/**
 * Why a held lock (or a queued waiter) can no longer be trusted:
 * - `session`: its session was lost (`cause` is the {@link LeaseLostError});
 * - `deleted`: its key was deleted by someone else;
 * - `overwritten`: its key was written by someone else;
 * - `expired-in-queue`: the key vanished while waiting (the lease expired in the queue).
 */
export type LockLostReason = 'session' | 'deleted' | 'overwritten' | 'expired-in-queue';

export class LockLostError extends LeaseholdError {
  constructor(
    readonly reason: LockLostReason,
    readonly key: string,
    readonly token: bigint,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('LOCK_LOST', message, options);
  }
}

/** The lock was released by its holder; its guard helpers no longer write. */
export class LockReleasedError extends LeaseholdError {
  constructor(
    readonly key: string,
    readonly token: bigint,
  ) {
    super('LOCK_RELEASED', `lock ${key} (token ${token}) was released; acquire it again to write`);
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
export const isLockTakenError = (err: unknown): err is LockTakenError => hasCode(err, 'LOCK_TAKEN');
export const isLockLostError = (err: unknown): err is LockLostError => hasCode(err, 'LOCK_LOST');
export const isLockTimeoutError = (err: unknown): err is LockTimeoutError =>
  hasCode(err, 'LOCK_TIMEOUT');
export const isLockReleasedError = (err: unknown): err is LockReleasedError =>
  hasCode(err, 'LOCK_RELEASED');
