import { checkResource, type FencedStore, type FencedValue } from './contract.js';
import { StaleTokenError } from './errors.js';
import { parseToken, type TokenInput } from './token.js';

/**
 * Where a memory store keeps its data. Pass the same map to several stores to model several
 * clients of one resource (the conformance suite's "reopen").
 */
export type MemoryState = Map<string, { highestToken: bigint; value?: FencedValue }>;

/**
 * The reference fence: what every backend does, in a few lines of plain JavaScript. Use it in
 * documentation and in your own unit tests in place of a real store. Atomicity comes from running
 * the check and the write in one synchronous step, with no `await` between them.
 */
export class MemoryStore implements FencedStore {
  constructor(readonly state: MemoryState = new Map()) {}

  /**
   * Runs `apply` iff `token` is accepted for `resource`, and records the token as the highest
   * only if `apply` returns normally: a throwing `apply` leaves no trace of the token.
   * `apply` must be synchronous; that is what makes check-and-write atomic here.
   */
  withFence<T>(resource: string, token: TokenInput, apply: () => T): T {
    checkResource(resource);
    const t = parseToken(token);
    const entry = this.state.get(resource);
    if (entry !== undefined && t < entry.highestToken) {
      throw new StaleTokenError(resource, t, entry.highestToken);
    }
    const result = apply();
    if (entry === undefined) this.state.set(resource, { highestToken: t });
    else entry.highestToken = t;
    return result;
  }

  async write(resource: string, token: TokenInput, value: string): Promise<void> {
    const written = this.withFence(resource, token, () => ({ value, token: parseToken(token) }));
    // Same synchronous step as the check: nothing can run in between.
    const entry = this.state.get(resource);
    if (entry !== undefined) entry.value = written;
  }

  async read(resource: string): Promise<FencedValue | undefined> {
    return this.state.get(checkResource(resource))?.value;
  }

  async highestToken(resource: string): Promise<bigint | undefined> {
    return this.state.get(checkResource(resource))?.highestToken;
  }
}
