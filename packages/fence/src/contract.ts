import { describeType, invalid, InvalidArgumentError } from './errors.js';
import { parseToken, type TokenInput } from './token.js';

/** What every fenced call names: the resource written and the writer's token. */
export interface Fence {
  /** The name of what is written; one highest token is kept per resource. */
  resource: string;
  /**
   * The writer's fencing token (a lock's `token`): a `bigint`, a canonical decimal string or a
   * safe integer, from 1 to {@link "@leasehold/fence"!MAX_TOKEN}. Anything else throws
   * {@link "@leasehold/fence"!InvalidTokenError}.
   */
  token: TokenInput;
}

/** Every key of {@link Fence}. */
export const FENCE_KEYS = keysOf<Fence>()(['resource', 'token']);

/** A value as a fenced store holds it: the last accepted write and the token it came with. */
export interface FencedValue {
  /** The value of the last accepted write. */
  readonly value: string;
  /** The token that write came with. */
  readonly token: bigint;
}

/**
 * The smallest shape every fence adapter can offer: one string value per resource, written under
 * a fencing token. The conformance suite drives adapters through it; each backend module also
 * has richer, backend-specific helpers (fenced rows, fenced transactions, fenced Redis commands).
 *
 * Semantics every implementation must keep:
 * - `write` applies the value iff `token >= highestToken(resource)` (or none is recorded), and
 *   records `token` as the new highest, atomically with the write;
 * - otherwise it rejects with `StaleTokenError` and changes nothing;
 * - an invalid token rejects with `InvalidTokenError` before anything is sent;
 * - resources are independent of each other.
 */
export interface FencedStore {
  /**
   * Writes `value` to `resource` if `token` is at least the highest the resource has accepted.
   *
   * @throws {@link "@leasehold/fence"!StaleTokenError} when the resource has accepted a higher
   *   token; nothing changed.
   * @throws {@link "@leasehold/fence"!InvalidTokenError} for a token out of range; nothing was
   *   sent.
   */
  write(write: Fence & { value: string }): Promise<void>;
  /** The last accepted write of `resource` with its token; `undefined` if none was. */
  read(resource: string): Promise<FencedValue | undefined>;
  /** The highest token `resource` has accepted; `undefined` if none. */
  highestToken(resource: string): Promise<bigint | undefined>;
}

/** Options of the SQL stores (`postgresStore`, `sqliteStore`). */
export interface SqlStoreOptions {
  /** The value table, created with the module's `...StoreDDL`. Default `leasehold_value`. */
  valueTable?: string;
  /**
   * How writes are fenced: `row` with `upsertFencedRow` on the value table's own fence column,
   * `fence-table` with `withFence`. Default `row`.
   */
  via?: 'row' | 'fence-table';
  /** The fence table for `via: 'fence-table'`. Default `leasehold_fence`. */
  fenceTable?: string;
}

/** Every key of {@link SqlStoreOptions}. */
const SQL_STORE_OPTION_KEYS = keysOf<SqlStoreOptions>()(['valueTable', 'via', 'fenceTable']);

/** Every key of a {@link FencedStore.write} argument. */
const WRITE_KEYS = keysOf<Parameters<FencedStore['write']>[0]>()(['resource', 'token', 'value']);

/** Keys of `T` that `Listed` leaves out: `unknown` when there are none, else a type to fail on. */
type Unlisted<T, Listed> = [Exclude<keyof T, Listed>] extends [never]
  ? unknown
  : { 'every key must be listed, missing': Exclude<keyof T, Listed> };

/**
 * The keys of `T`, every one of them, as the list {@link checkKeys} allows:
 * `keysOf<X>()(['a', 'b'])` does not compile when the list names something that is not a key of
 * `X`, or leaves a key of `X` out. So a field added to an options interface cannot be forgotten
 * here (it would be refused), and a misspelt name cannot be allowed.
 */
export function keysOf<T extends object>() {
  return <const K extends readonly (keyof T & string)[]>(keys: K & Unlisted<T, K[number]>): K =>
    keys;
}

/**
 * Refuses a key that `allowed` does not list, in core's wording (`checkOptions`): a misspelt
 * option (`prefx`) must not silently fall back to its default. A listed key whose value is
 * `undefined` counts as left out; another key is refused whatever its value. The message shows
 * only the value's type: a misspelt option may hold a secret.
 */
export function checkKeys(name: string, value: object, allowed: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (allowed.includes(key)) continue;
    const type = describeType((value as Record<string, unknown>)[key]);
    throw new InvalidArgumentError(
      `${name}.${key} must be left out (not an option; allowed: ${allowed.join(', ')}), got ${type}`,
    );
  }
}

/** Resource names are opaque strings; the empty string is refused as almost always a bug. */
/** An unpaired UTF-16 surrogate (core keeps the same check; core is optional here). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * A resource name. Never with an unpaired surrogate: every store sends it as UTF-8, where each
 * lone half is U+FFFD, so two such names would share one fence.
 */
export function checkResource(resource: unknown): string {
  if (typeof resource !== 'string' || resource.length === 0 || LONE_SURROGATE.test(resource)) {
    throw invalid(
      'resource',
      'a non-empty string without unpaired UTF-16 surrogates (the name of what the token fences)',
      resource,
    );
  }
  return resource;
}

/**
 * Validates the `{ resource, token }` argument. A string here is the positional style of earlier
 * versions (`withFence(db, resource, token, fn)`): it gets a message that says so. `keys` names
 * the argument and every key it may have (the fence's and the call's options): any other key
 * is refused.
 */
export function checkFence(
  fence: unknown,
  keys: { name: string; allowed: readonly string[] },
): { resource: string; token: bigint } {
  if (typeof fence !== 'object' || fence === null) {
    throw invalid('fence', 'an object { resource, token, ... } as the second argument', fence);
  }
  checkKeys(keys.name, fence, keys.allowed);
  const { resource, token } = fence as Partial<Fence>;
  return { resource: checkResource(resource), token: parseToken(token as TokenInput) };
}

/**
 * Validates a {@link FencedStore.write} argument: the fence, and a string value (stores keep
 * strings; a number or object would come back as something else, or fail inside the driver).
 */
export function checkWrite(write: unknown): { resource: string; token: bigint; value: string } {
  const fence = checkFence(write, { name: 'write', allowed: WRITE_KEYS });
  const { value } = write as { value?: unknown };
  if (typeof value !== 'string') {
    throw invalid(
      'value',
      'a string (a fenced store writes strings: serialise others first)',
      value,
    );
  }
  return { ...fence, value };
}

/**
 * Refuses an argument that is not an object: `shape` says what is allowed. With `allowed` (an
 * options or argument object, see {@link keysOf}), a key it does not list is refused too, as
 * {@link checkKeys} does; without it (a map of the user's own data) every key is free.
 */
export function checkObject(
  name: string,
  value: unknown,
  shape: string,
  allowed?: readonly string[],
): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalid(name, `an object ${shape}`, value);
  }
  if (allowed !== undefined) checkKeys(name, value, allowed);
}

/** Refuses a callback that is not a function, before anything is sent. */
export function checkFunction(name: string, value: unknown): void {
  if (typeof value === 'function') return;
  throw invalid(name, 'a function', value);
}

/** Validates the options of the SQL stores (`postgresStore`, `sqliteStore`). */
export function checkSqlStoreOptions(options: unknown): SqlStoreOptions {
  checkObject('options', options, '{ valueTable?, via?, fenceTable? }', SQL_STORE_OPTION_KEYS);
  const { via, valueTable, fenceTable } = options as SqlStoreOptions;
  if (via !== undefined && via !== 'row' && via !== 'fence-table') {
    throw invalid('options.via', "'row' or 'fence-table'", via);
  }
  for (const [name, table] of [
    ['valueTable', valueTable],
    ['fenceTable', fenceTable],
  ] as const) {
    if (table !== undefined && typeof table !== 'string') {
      throw invalid(`options.${name}`, 'a table name (a string)', table);
    }
  }
  return options as SqlStoreOptions;
}
