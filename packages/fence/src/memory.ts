/**
 * The reference fence: what every backend does, in a few lines of plain JavaScript. Use it in
 * documentation and in your own unit tests in place of a real store. Atomicity comes from running
 * the check and the write in one synchronous step, with no `await` between them.
 *
 * @module @leasehold/fence/memory
 */
import {
  checkFence,
  checkWrite,
  checkResource,
  FENCE_KEYS,
  type Fence,
  type FencedStore,
  type FencedValue,
} from './contract.js';
import { invalid, StaleTokenError } from './errors.js';

/**
 * Where memory fencing keeps its data: the in-memory "database". Pass the same map to several
 * stores to model several clients of one resource (the conformance suite's "reopen").
 */
export type MemoryState = Map<
  string,
  {
    /** The highest token the resource has accepted. */
    highestToken: bigint;
    /** The last value a store wrote (absent after a bare {@link withFence}). */
    value?: FencedValue;
  }
>;

/**
 * Runs `apply` iff `token` is accepted for `resource`, and records the token as the highest
 * only if `apply` returns normally: a throwing `apply` leaves no trace of the token.
 * `apply` must be synchronous; that is what makes check-and-write atomic here.
 *
 * @throws StaleTokenError when `state` holds a higher token for `resource`; `apply` did not run.
 */
export function withFence<T>(state: MemoryState, fence: Fence, apply: () => T): T {
  checkState(state);
  const { resource, token } = checkFence(fence, { name: 'fence', allowed: FENCE_KEYS });
  const entry = state.get(resource);
  if (entry !== undefined && token < entry.highestToken) {
    throw new StaleTokenError(resource, token, entry.highestToken);
  }
  const result = apply();
  if (entry === undefined) state.set(resource, { highestToken: token });
  else entry.highestToken = token;
  return result;
}

/** A {@link FencedStore} over a {@link MemoryState}. */
export interface MemoryStore extends FencedStore {
  /** The map it keeps its data in: the one given to {@link memoryStore}, or its own. */
  readonly state: MemoryState;
}

/** The state argument: a Map, or every later call would fail far from the mistake. */
function checkState(state: unknown): void {
  if (!(state instanceof Map)) throw invalid('state', 'a Map of resource states', state);
}

/**
 * A {@link FencedStore} in memory, over `state` (default: a new, empty map).
 *
 * @example
 * ```ts
 * import { memoryStore } from '@leasehold/fence/memory';
 *
 * const store = memoryStore();
 * await store.write({ resource: 'report', token: 7n, value: 'v1' });
 * await store.write({ resource: 'report', token: 5n, value: 'late' }); // rejects: StaleTokenError
 * ```
 */
export function memoryStore(state: MemoryState = new Map()): MemoryStore {
  checkState(state);
  return {
    state,
    async write(write) {
      const { resource, token, value } = checkWrite(write);
      withFence(state, { resource, token }, () => undefined);
      // Same synchronous step as the check: nothing can run in between.
      state.get(resource)!.value = { value, token };
    },
    async read(resource) {
      return state.get(checkResource(resource))?.value;
    },
    async highestToken(resource) {
      return state.get(checkResource(resource))?.highestToken;
    },
  };
}
