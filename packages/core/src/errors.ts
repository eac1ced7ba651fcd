/**
 * Brands registered with `Symbol.for`, so that the `isX(err)` guards (unlike `instanceof`) keep
 * working when two copies of a package are installed: core's own, and one that every leasehold
 * package's `InvalidArgumentError` carries (core's, fence's, cron's), so that
 * `isInvalidArgumentError` answers for bad input to any of them.
 */
const BRAND = Symbol.for('leasehold.core.error');
const INVALID_ARGUMENT_BRAND = Symbol.for('leasehold.invalid-argument');

/** The stable `code` of every {@link LeaseholdError}, one per error class. */
export type LeaseholdErrorCode =
  | 'INVALID_ARGUMENT'
  | 'CONNECT_FAILED'
  | 'TLS_FAILED'
  | 'AUTH_FAILED'
  | 'PERMISSION_DENIED'
  | 'ETCD_UNAVAILABLE'
  | 'ETCD_REQUEST_FAILED'
  | 'LEASE_LOST'
  | 'CLUSTER_CHANGED'
  | 'SESSION_CLOSED'
  | 'CLIENT_CLOSED'
  | 'LOCK_TAKEN'
  | 'LOCK_TIMEOUT'
  | 'LOCK_LOST'
  | 'LOCK_RELEASED'
  | 'CAMPAIGN_TIMEOUT'
  | 'LEADERSHIP_LOST'
  | 'LEADERSHIP_RESIGNED'
  | 'INSUFFICIENT_LEASE_TIME'
  | 'PERMITS_MISMATCH';

/**
 * The base of every error `@leasehold/core` throws: `name` is the class name, `code` a stable
 * {@link LeaseholdErrorCode}, and `cause` the underlying failure where there is one. Test for it
 * with {@link isLeaseholdError}, which works across two installed copies of the package.
 *
 * @example
 * ```ts
 * try {
 *   await using lock = await client.tryAcquire('jobs');
 * } catch (err) {
 *   if (isLockTakenError(err)) console.log(`held by ${err.holderValue} (token ${err.holderToken})`);
 *   else throw err;
 * }
 * ```
 */
export class LeaseholdError extends Error {
  /** Which failure this is; one value per class, stable across releases. */
  declare readonly code: LeaseholdErrorCode;

  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(code: LeaseholdErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    Object.defineProperty(this, 'code', { value: code, enumerable: true });
    Object.defineProperty(this, BRAND, { value: code });
    this.name = new.target.name;
  }
}

/** A leasehold error class that only carries a message (and a cause). */
function plain(code: LeaseholdErrorCode) {
  return class extends LeaseholdError {
    /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
    constructor(message: string, options?: { cause?: unknown }) {
      super(code, message, options);
    }
  };
}

/**
 * Bad input: the message names the value and what is allowed. Thrown where the call is made.
 * `isInvalidArgumentError` also answers for the bad-input errors of `@leasehold/fence` and
 * `@leasehold/cron`.
 */
export class InvalidArgumentError extends plain('INVALID_ARGUMENT') {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    Object.defineProperty(this, INVALID_ARGUMENT_BRAND, { value: true });
  }
}

/** No endpoint answered within `dialTimeoutMs`; `endpoints` lists what was tried. */
export class ConnectError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    message: string,
    /** The endpoints `connect()` tried, as given in {@link ConnectOptions.endpoints}. */
    readonly endpoints: readonly string[],
    options?: { cause?: unknown },
    code: LeaseholdErrorCode = 'CONNECT_FAILED',
  ) {
    super(code, message, options);
  }
}

/**
 * What went wrong in the TLS handshake with etcd:
 * - `untrusted-server`: the server's certificate is not signed by `tls.caCert` (or expired);
 * - `name-mismatch`: the server's certificate does not name the endpoint's host;
 * - `client-cert-rejected`: the server wants a client certificate signed by a CA it trusts, and
 *   got none, or another;
 * - `server-not-tls`: an https endpoint, but the server speaks plaintext;
 * - `server-requires-tls`: an http endpoint, but the server speaks TLS.
 */
export type TlsFailure =
  | 'untrusted-server'
  | 'name-mismatch'
  | 'client-cert-rejected'
  | 'server-not-tls'
  | 'server-requires-tls';

/**
 * `connect()` reached no endpoint because of the TLS set-up: a {@link ConnectError} whose
 * `failure` says what to fix. Retrying will not help.
 */
export class TlsError extends ConnectError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** What to fix in the TLS set-up. */
    readonly failure: TlsFailure,
    message: string,
    endpoints: readonly string[],
    options?: { cause?: unknown },
  ) {
    super(message, endpoints, options, 'TLS_FAILED');
  }
}

/** etcd refused the credentials (wrong or missing user or password); retrying will not help. */
export class AuthError extends plain('AUTH_FAILED') {}

/** etcd did not answer (no connection, or not before the call's deadline) after every safe retry. */
export class EtcdUnavailableError extends plain('ETCD_UNAVAILABLE') {}

/** etcd answered with a refusal (permission denied, bad request, ...): retrying will not help. */
export class EtcdRequestError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    message: string,
    options?: { cause?: unknown },
    code: LeaseholdErrorCode = 'ETCD_REQUEST_FAILED',
  ) {
    super(code, message, options);
  }
}

/**
 * etcd's RBAC refused a call: the user's roles do not grant it the keys in `keys` (a readable
 * description such as `prefix "/leasehold/lock/"`, or `unknown` when the call had none). An
 * {@link EtcdRequestError}; retrying will not help until a role grants the range.
 */
export class PermissionDeniedError extends EtcdRequestError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The keys the call needed, readable: `prefix "/leasehold/lock/"`, or `unknown`. */
    readonly keys: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options, 'PERMISSION_DENIED');
  }
}

/**
 * Why a session stopped being trustworthy:
 * - `deadline`: no keepalive answer arrived before the local deadline;
 * - `gone`: etcd says the lease no longer exists (it expired, or someone revoked it);
 * - `cluster-changed`: a {@link ClusterChangedError};
 * - `closed`: its owner closed it ({@link SessionClosedError}).
 */
export type LeaseLostReason = 'deadline' | 'gone' | 'cluster-changed' | 'closed';

/** The session's lease can no longer be trusted to be alive; `reason` says why. */
export class LeaseLostError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** Why the lease can no longer be trusted. */
    readonly reason: LeaseLostReason,
    /** The lost lease's id (0 on the client-wide {@link ClusterChangedError}). */
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
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(leaseId: bigint) {
    const message = `session for lease ${leaseId.toString(16)} was closed`;
    super('closed', leaseId, message, undefined, 'SESSION_CLOSED');
  }
}

/**
 * The etcd cluster is not the one the client first met: it answered with another cluster id
 * (rebuilt), or with a revision lower than one already seen (restored from a snapshot). Revisions
 * (fencing tokens) from before and after are not comparable, so the client stops issuing tokens
 * for good. `leaseId` is 0 on the client-wide error; each session's copy names its lease.
 */
export class ClusterChangedError extends LeaseLostError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    leaseId: bigint,
    /** What changed, in plain words. */
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    const message =
      `the etcd cluster changed: ${detail}. Revisions (fencing tokens) from before and after ` +
      'are not comparable, so this client issues no more tokens; connect() again once the ' +
      'cluster is trusted';
    super('cluster-changed', leaseId, message, options, 'CLUSTER_CHANGED');
  }
}

/** The client was closed; make a new one with `connect()`. */
export class ClientClosedError extends plain('CLIENT_CLOSED') {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor() {
    super('this leasehold client is closed; connect() again to make a new one');
  }
}

/**
 * `tryAcquire` found the lock held. Says by whom: the holder's key, fencing token and value
 * (`hostname:pid` for a leasehold holder by default; empty for `etcdctl lock`).
 */
export class LockTakenError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The lock (or semaphore) asked for. */
    readonly lockName: string,
    /** The etcd key of the holder found. */
    readonly holderKey: string,
    /** The holder's fencing token. */
    readonly holderToken: bigint,
    /** The holder's value (`hostname:pid` by default); empty when it wrote none. */
    readonly holderValue = '',
    /** What is taken, for the message: `lock "jobs"`, `all 3 permits of semaphore "api"`. */
    what = `lock ${JSON.stringify(lockName)}`,
  ) {
    const by = holderValue === '' ? '' : ` ${JSON.stringify(holderValue)}`;
    super('LOCK_TAKEN', `${what} is held by${by} ${holderKey} (token ${holderToken})`);
  }
}

/** `acquire` waited `timeoutMs` without getting the lock; its place in the queue is removed. */
export class LockTimeoutError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The lock (or semaphore) asked for. */
    readonly lockName: string,
    /** The `timeoutMs` the call gave. */
    readonly timeoutMs: number,
    what = `lock ${JSON.stringify(lockName)}`,
  ) {
    super('LOCK_TIMEOUT', `${what} was not acquired within ${timeoutMs} ms (timeoutMs)`);
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

/**
 * What every lost hold says, a lock's ({@link LockLostError}) or a leadership's
 * ({@link LeadershipLostError}): why, and the key and token it held (or waited with).
 */
export class HoldLostError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    code: 'LOCK_LOST' | 'LEADERSHIP_LOST',
    /** Why the hold can no longer be trusted. */
    readonly reason: LockLostReason,
    /** The etcd key the hold had (or waited with). */
    readonly key: string,
    /** The hold's fencing token: writes fenced with it are now refused by a newer holder's. */
    readonly token: bigint,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
  }
}

/** A held lock (or a queued waiter) can no longer be trusted; `reason` says why. */
export class LockLostError extends HoldLostError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    reason: LockLostReason,
    key: string,
    token: bigint,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('LOCK_LOST', reason, key, token, message, options);
  }
}

/** The lock was released by its holder; its write helpers no longer write. */
export class LockReleasedError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The released lock's etcd key. */
    readonly key: string,
    /** The released lock's fencing token. */
    readonly token: bigint,
  ) {
    super('LOCK_RELEASED', `lock ${key} (token ${token}) was released; acquire it again to write`);
  }
}

/** `campaign` waited `timeoutMs` without being elected; its candidacy is withdrawn. */
export class CampaignTimeoutError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The election campaigned in. */
    readonly election: string,
    /** The `timeoutMs` the call gave. */
    readonly timeoutMs: number,
  ) {
    super(
      'CAMPAIGN_TIMEOUT',
      `election ${JSON.stringify(election)} was not won within ${timeoutMs} ms (timeoutMs)`,
    );
  }
}

/**
 * A leadership (or a waiting candidacy) can no longer be trusted; `reason` as for locks
 * ({@link LockLostReason}). The fencing token of the term is `token`.
 */
export class LeadershipLostError extends HoldLostError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    reason: LockLostReason,
    /** The election whose leadership was lost. */
    readonly election: string,
    key: string,
    token: bigint,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('LEADERSHIP_LOST', reason, key, token, message, options);
  }
}

/** The leader resigned; the leadership's write helpers no longer write. */
export class LeadershipResignedError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The election resigned from. */
    readonly election: string,
    /** The leadership's etcd key. */
    readonly key: string,
    /** The fencing token of the resigned term. */
    readonly token: bigint,
  ) {
    super(
      'LEADERSHIP_RESIGNED',
      `leadership of ${JSON.stringify(election)} (${key}, token ${token}) was resigned; campaign again to lead`,
    );
  }
}

/**
 * `assertTimeLeft(ms)` found less than `neededMs` left before the lease's local deadline: work
 * that needs that long could not finish inside the lease. `leftMs` is 0 once the hold or session
 * is lost, and `cause` is then the loss.
 */
export class InsufficientLeaseTimeError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The time asked for, in ms (the argument of `assertTimeLeft`). */
    readonly neededMs: number,
    /** The time left before the lease's local deadline, in ms; 0 once lost. */
    readonly leftMs: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('INSUFFICIENT_LEASE_TIME', message, options);
  }
}

/**
 * A semaphore's holders and waiters all use one `permits`: the first holder's is the semaphore's
 * limit until its queue is empty again. This call asked for `permits`; the semaphore has
 * `heldPermits` (`NaN` if what is in its queue names none: a key someone wrote by hand). Nothing
 * was acquired, and nothing was left in the queue.
 */
export class PermitsMismatchError extends LeaseholdError {
  /** Made by leasehold where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The semaphore asked for. */
    readonly semaphore: string,
    /** The `permits` this call gave. */
    readonly permits: number,
    /** The `permits` the semaphore is in use with; `NaN` if its queue names none. */
    readonly heldPermits: number,
  ) {
    const held = Number.isNaN(heldPermits)
      ? 'holds a key that names no permits (written by another tool?)'
      : `is in use with permits ${heldPermits}`;
    super(
      'PERMITS_MISMATCH',
      `semaphore ${JSON.stringify(semaphore)} ${held}; this call asked for permits ${permits}. Every holder and waiter of a semaphore must give the same permits (a new limit takes effect once nobody holds or waits)`,
    );
  }
}

function guard<E extends LeaseholdError>(...codes: LeaseholdErrorCode[]) {
  return (err: unknown): err is E =>
    typeof err === 'object' &&
    err !== null &&
    BRAND in err &&
    (codes.length === 0 || codes.includes((err as Record<symbol, LeaseholdErrorCode>)[BRAND]!));
}

/**
 * Any error thrown by `@leasehold/core`: a {@link LeaseholdError}, also from another installed copy of the package.
 */
export const isLeaseholdError = guard<LeaseholdError>();
/** Bad input to any leasehold package (core, fence, cron): see {@link InvalidArgumentError}. */
export const isInvalidArgumentError = (err: unknown): err is InvalidArgumentError =>
  typeof err === 'object' && err !== null && INVALID_ARGUMENT_BRAND in err;
/** A {@link ConnectError}, including its {@link TlsError} kind. */
export const isConnectError = guard<ConnectError>('CONNECT_FAILED', 'TLS_FAILED');
/** A {@link TlsError}. */
export const isTlsError = guard<TlsError>('TLS_FAILED');
/** An {@link AuthError}. */
export const isAuthError = guard<AuthError>('AUTH_FAILED');
/** An {@link EtcdUnavailableError}. */
export const isEtcdUnavailableError = guard<EtcdUnavailableError>('ETCD_UNAVAILABLE');
/** An {@link EtcdRequestError}, including its {@link PermissionDeniedError} kind. */
export const isEtcdRequestError = guard<EtcdRequestError>(
  'ETCD_REQUEST_FAILED',
  'PERMISSION_DENIED',
);
/** A {@link PermissionDeniedError}. */
export const isPermissionDeniedError = guard<PermissionDeniedError>('PERMISSION_DENIED');
/**
 * A {@link LeaseLostError}, including its {@link SessionClosedError} and {@link ClusterChangedError} kinds.
 */
export const isLeaseLostError = guard<LeaseLostError>(
  'LEASE_LOST',
  'SESSION_CLOSED',
  'CLUSTER_CHANGED',
);
/** A {@link SessionClosedError}. */
export const isSessionClosedError = guard<SessionClosedError>('SESSION_CLOSED');
/** A {@link ClusterChangedError}. */
export const isClusterChangedError = guard<ClusterChangedError>('CLUSTER_CHANGED');
/** A {@link ClientClosedError}. */
export const isClientClosedError = guard<ClientClosedError>('CLIENT_CLOSED');
/** A {@link LockTakenError}. */
export const isLockTakenError = guard<LockTakenError>('LOCK_TAKEN');
/** A {@link LockTimeoutError}. */
export const isLockTimeoutError = guard<LockTimeoutError>('LOCK_TIMEOUT');
/** A {@link LockLostError}. */
export const isLockLostError = guard<LockLostError>('LOCK_LOST');
/** A lost lock or leadership: {@link HoldLostError}. */
export const isHoldLostError = guard<HoldLostError>('LOCK_LOST', 'LEADERSHIP_LOST');
/** A {@link LockReleasedError}. */
export const isLockReleasedError = guard<LockReleasedError>('LOCK_RELEASED');
/** A {@link CampaignTimeoutError}. */
export const isCampaignTimeoutError = guard<CampaignTimeoutError>('CAMPAIGN_TIMEOUT');
/** A {@link LeadershipLostError}. */
export const isLeadershipLostError = guard<LeadershipLostError>('LEADERSHIP_LOST');
/** A {@link LeadershipResignedError}. */
export const isLeadershipResignedError = guard<LeadershipResignedError>('LEADERSHIP_RESIGNED');
/** An {@link InsufficientLeaseTimeError}. */
export const isInsufficientLeaseTimeError =
  guard<InsufficientLeaseTimeError>('INSUFFICIENT_LEASE_TIME');
/** A {@link PermitsMismatchError}. */
export const isPermitsMismatchError = guard<PermitsMismatchError>('PERMITS_MISMATCH');
