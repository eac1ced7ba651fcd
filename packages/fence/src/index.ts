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
