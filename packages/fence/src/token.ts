import { InvalidTokenError } from './errors.js';

/** What callers may pass as a fencing token. Inside the package a token is always a `bigint`. */
export type TokenInput = bigint | string | number;

/** etcd revisions are int64; nothing above this can be a token, and SQL int8 holds exactly this. */
export const MAX_TOKEN = 2n ** 63n - 1n;

const CANONICAL = /^[1-9][0-9]*$/;

/**
 * Validates a fencing token and returns it as a `bigint`.
 *
 * Strings must be canonical (what {@link tokenToString} produces) because backends without
 * integer comparison (Redis Lua) compare tokens as strings by length then bytes, which is only
 * correct for canonical decimals. Numbers above 2^53-1 are refused: they may already have been
 * rounded, so the token the caller meant is unknowable.
 *
 * @throws {@link InvalidTokenError} for anything else: below 1, above {@link MAX_TOKEN}, a
 *   non-canonical string (`"042"`, `" 42"`), a number that is not a safe integer.
 *
 * @example
 * ```ts
 * parseToken(42n); // 42n
 * parseToken('9007199254740993'); // 9007199254740993n (exact, unlike a number)
 * parseToken('042'); // throws InvalidTokenError
 * ```
 */
export function parseToken(value: TokenInput): bigint {
  if (typeof value === 'bigint') {
    if (value < 1n) throw new InvalidTokenError(value, 'tokens start at 1');
    if (value > MAX_TOKEN) throw new InvalidTokenError(value, 'above the int64 maximum');
    return value;
  }
  if (typeof value === 'string') {
    if (!CANONICAL.test(value)) {
      throw new InvalidTokenError(value, 'not a canonical decimal string');
    }
    // Length check first keeps BigInt() off absurdly long inputs.
    if (value.length > 19 || BigInt(value) > MAX_TOKEN) {
      throw new InvalidTokenError(value, 'above the int64 maximum');
    }
    return BigInt(value);
  }
  if (typeof value === 'number') {
    if (!Number.isInteger(value)) throw new InvalidTokenError(value, 'not an integer');
    if (value < 1) throw new InvalidTokenError(value, 'tokens start at 1');
    if (!Number.isSafeInteger(value)) {
      throw new InvalidTokenError(value, 'numbers above 2^53-1 lose precision; pass a bigint');
    }
    return BigInt(value);
  }
  throw new InvalidTokenError(value, 'not a bigint, string or number');
}

/**
 * The canonical decimal form of a token: how tokens travel on the wire and into stores.
 *
 * @throws {@link InvalidTokenError} as {@link parseToken}.
 */
export function tokenToString(value: TokenInput): string {
  return parseToken(value).toString();
}
