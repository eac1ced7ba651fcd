/**
 * Sessions, fair fenced locks, counting semaphores, read/write locks and leader election on
 * etcd. Every lock grant, permit and term of leadership carries a fencing token: its key's etcd
 * create revision, a `bigint` that only grows across the cluster, for the protected resource to
 * check (see `@leasehold/fence`).
 *
 * Start with {@link connect}; the {@link Leasehold} client it returns makes every lock, permit
 * and leadership. Errors are {@link LeaseholdError}s; test them with the `isX(err)` guards.
 * `@leasehold/core/internal` is not part of this reference: it is for leasehold's own packages.
 *
 * @example
 * ```ts
 * import { connect } from '@leasehold/core';
 *
 * await using client = await connect({ endpoints: ['http://127.0.0.1:2379'] });
 * await using lock = await client.acquire('reports/daily', { timeoutMs: 30_000 });
 * await lock.put('/reports/daily/status', `running under token ${lock.token}`);
 * ```
 *
 * @module @leasehold/core
 */
export { Leasehold } from './client.js';
export { connect, type ConnectOptions } from './connect.js';
export { Session, type SessionOptions } from './session.js';
export { Lock, type AcquireOptions, type TryAcquireOptions, type LockContext } from './mutex.js';
export { type LockGuard, type FencedOp, type Holder } from './hold.js';
export {
  Permit,
  MAX_PERMITS,
  type PermitOptions,
  type TryPermitOptions,
  type PermitContext,
  type PermitHolder,
  type SemaphoreState,
} from './semaphore.js';
export { Leadership, type CampaignOptions } from './election.js';
export { type LeaderState, type ObserveOptions } from './observe.js';
export { type LeadOptions, type LeaderContext, type LeaderWork } from './lead.js';
export {
  defaults,
  MIN_TTL_SECONDS,
  MAX_TTL_SECONDS,
  MAX_NAME_LENGTH,
  MAX_VALUE_BYTES,
  type AuthOptions,
  type TlsOptions,
} from './options.js';
export { type Logger, type LogFn } from './logger.js';
export { type TelemetryOptions } from './telemetry.js';
export { type StallEvent } from './stall.js';
export * from './errors.js';
