export { connect, Leasehold, type ConnectOptions } from './client.js';
export { Session, type SessionOptions } from './session.js';
export {
  Lock,
  type AcquireOptions,
  type TryAcquireOptions,
  type LockContext,
  type LockGuard,
  type FencedOp,
} from './mutex.js';
export {
  defaults,
  MIN_TTL_SECONDS,
  MAX_TTL_SECONDS,
  MAX_NAME_LENGTH,
  type AuthOptions,
  type TlsOptions,
} from './options.js';
export * from './errors.js';
