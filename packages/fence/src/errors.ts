/**
 * Every error the fence adapters throw extends {@link FenceError}: it has a stable `code`, a
 * `name` equal to its class name, and the underlying failure as `cause`.
 *
 * A {@link StaleTokenError} is an expected outcome (a newer holder has written), not an
 * infrastructure failure: driver and network errors pass through unchanged so callers can tell
 * the two apart.
 *
 * Use the `isX(err)` guards rather than `instanceof`: they check a brand registered with
 * `Symbol.for`, so they keep working when two copies of the package are installed. The brand is
 * this package's own, except for bad input: every leasehold package's `InvalidArgumentError`
 * carries one shared brand, so `isInvalidArgumentError` (of any package) answers for all of them.
 */
const BRAND = Symbol.for('leasehold.fence.error');

/** The stable `code` of every {@link FenceError}, one per error class. */
export type FenceErrorCode = 'INVALID_TOKEN' | 'STALE_TOKEN' | 'INVALID_ARGUMENT';

/**
 * The base of every error the fence adapters throw: `name` is the class name, `code` a stable
 * {@link FenceErrorCode}. Driver and network errors are not wrapped: they pass through as they
 * are. Test for it with {@link isFenceError}.
 */
export class FenceError extends Error {
  /** Which failure this is; one value per class, stable across releases. */
  declare readonly code: FenceErrorCode;

  /** Made by the adapters where the failure happens; exported for `instanceof` and tests. */
  constructor(code: FenceErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    Object.defineProperty(this, 'code', { value: code, enumerable: true });
    Object.defineProperty(this, BRAND, { value: code });
    this.name = new.target.name;
  }
}

function hasCode(err: unknown, code?: FenceErrorCode): err is FenceError {
  if (typeof err !== 'object' || err === null || !(BRAND in err)) return false;
  return code === undefined || (err as Record<symbol, unknown>)[BRAND] === code;
}

/**
 * The resource has already accepted a higher token: the caller's lock was lost and someone else
 * has written since. The write was not applied.
 */
export class StaleTokenError extends FenceError {
  /** Made by the adapters where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The resource written. */
    readonly resource: string,
    /** The token the write came with, lower than the highest accepted. */
    readonly token: bigint,
    /** The highest token the resource has accepted, or `undefined` when the store could not say. */
    readonly highestToken: bigint | undefined,
  ) {
    super(
      'STALE_TOKEN',
      `stale fencing token ${token} for resource ${JSON.stringify(resource)}: ` +
        (highestToken === undefined
          ? 'the resource has accepted a higher token'
          : `the resource has accepted token ${highestToken}`) +
        '; only tokens >= the highest accepted are allowed',
    );
  }
}

/** A token that is not an integer in [1, 2^63-1]: the message names the value and the rule. */
export class InvalidTokenError extends FenceError {
  /** Made by the adapters where the failure happens; exported for `instanceof` and tests. */
  constructor(
    /** The value given as a token, as it was. */
    readonly value: unknown,
    reason: string,
  ) {
    super(
      'INVALID_TOKEN',
      'fencing token must be a bigint in [1, 2^63-1], ' +
        'a canonical decimal string (no sign, spaces or leading zeros) in that range, ' +
        `or a safe integer number >= 1, got ${describe(value)}: ${reason}`,
    );
  }
}

/**
 * Bad input every leasehold package throws carries this brand (`@leasehold/core`'s and
 * `@leasehold/cron`'s too), so each package's `isInvalidArgumentError` answers for all of them.
 */
const INVALID_ARGUMENT_BRAND = Symbol.for('leasehold.invalid-argument');

/** Bad input other than a token: the message names the value and what is allowed. */
export class InvalidArgumentError extends FenceError {
  /** Made by the adapters where the failure happens; exported for `instanceof` and tests. */
  constructor(message: string) {
    super('INVALID_ARGUMENT', message);
    Object.defineProperty(this, INVALID_ARGUMENT_BRAND, { value: true });
  }
}

/**
 * A value as bad-input messages show it: strings quoted (cut at 64 characters), bigints with `n`.
 * The same as core's: fence's stores run without `@leasehold/core` installed (it is an optional
 * peer), so this cannot come from `@leasehold/core/internal`. `errors.test.ts` keeps them equal.
 */
export function describe(value: unknown): string {
  if (typeof value === 'string') {
    return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
  }
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number') return String(value);
  return describeType(value);
}

/**
 * Only what kind of value it is, for values that may be secrets (a misspelt option may be
 * either): `null`, `an array`, else `typeof value`. The same as core's `describeType`, copied for
 * the same reason as {@link describe}; `errors.test.ts` keeps them equal.
 */
export function describeType(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'an array' : typeof value;
}

/**
 * The error for bad input, in the style every leasehold package uses:
 * `<name> must be <allowed>, got <value>`.
 */
export function invalid(name: string, allowed: string, value: unknown): InvalidArgumentError {
  return new InvalidArgumentError(`${name} must be ${allowed}, got ${describe(value)}`);
}

/** Any error of the fence adapters: a {@link FenceError}, also from another installed copy. */
export const isFenceError = (err: unknown): err is FenceError => hasCode(err);
/** A {@link StaleTokenError}: the write was refused because a newer token has written. */
export const isStaleTokenError = (err: unknown): err is StaleTokenError =>
  hasCode(err, 'STALE_TOKEN');
/** An {@link InvalidTokenError}. */
export const isInvalidTokenError = (err: unknown): err is InvalidTokenError =>
  hasCode(err, 'INVALID_TOKEN');
/**
 * Bad input: this package's `InvalidArgumentError`, or the bad-input error of another leasehold
 * package (such as `@leasehold/core`'s, which `fencedTxn`'s checks of ops throw).
 */
export const isInvalidArgumentError = (err: unknown): err is InvalidArgumentError =>
  typeof err === 'object' && err !== null && INVALID_ARGUMENT_BRAND in err;
