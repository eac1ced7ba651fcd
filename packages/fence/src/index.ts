/**
 * Fencing enforced in the store you write to: the resource keeps the highest fencing token it
 * has accepted and refuses lower ones, atomically with the write. This entry point has what every
 * backend shares: tokens ({@link parseToken}, {@link tokenToString}, {@link MAX_TOKEN}), errors
 * ({@link StaleTokenError}, {@link InvalidTokenError}, {@link InvalidArgumentError}), the store
 * contract ({@link FencedStore}) and the in-memory reference ({@link memoryStore}). The backends
 * are their own entry points: `@leasehold/fence/postgres`, `/redis`, `/sqlite`, `/etcd`,
 * `/memory`, and the adapter test suite `/conformance`.
 *
 * @module @leasehold/fence
 */
export {
  FenceError,
  InvalidArgumentError,
  InvalidTokenError,
  StaleTokenError,
  isFenceError,
  isInvalidArgumentError,
  isInvalidTokenError,
  isStaleTokenError,
  type FenceErrorCode,
} from './errors.js';
export { MAX_TOKEN, parseToken, tokenToString, type TokenInput } from './token.js';
export type { Fence, FencedStore, FencedValue, SqlStoreOptions } from './contract.js';
export { memoryStore, type MemoryState, type MemoryStore } from './memory.js';
