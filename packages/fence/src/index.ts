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
export type { FencedStore, FencedValue } from './contract.js';
export { MemoryStore, type MemoryState } from './memory.js';
