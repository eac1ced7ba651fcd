export { connect, Leasehold, type ConnectOptions } from './client.js';
export type { AuthOptions, TlsOptions } from './etcd.js';
export { Session, type SessionOptions } from './session.js';
export {
  Lock,
  type AcquireOptions,
  type TryAcquireOptions,
  type LockContext,
  type LockGuard,
  type FencedOp,
} from './lock.js';
export { defaults, MIN_TTL_SECONDS, MAX_TTL_SECONDS, MAX_NAME_LENGTH } from './options.js';
export * from './errors.js';
