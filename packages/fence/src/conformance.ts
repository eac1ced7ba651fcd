/**
 * The conformance suite every {@link FencedStore} adapter must pass, as vitest tests: call
 * {@link describeFenceConformance} in a test file with a factory for your store. Needs `vitest`
 * (an optional peer dependency of `@leasehold/fence`).
 *
 * @module @leasehold/fence/conformance
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkObject, keysOf, type FencedStore } from './contract.js';
import {
  isInvalidArgumentError,
  isInvalidTokenError,
  isStaleTokenError,
  type StaleTokenError,
} from './errors.js';
import { MAX_TOKEN, type TokenInput } from './token.js';

/** What an adapter hands the conformance suite. */
export interface FenceConformanceHarness {
  /** The store every case writes through. */
  readonly store: FencedStore;
  /** A store on a new client or connection over the same data, to check what persisted. */
  reopen(): Promise<FencedStore>;
  /** Releases what the harness opened (clients, connections, its own tables or keys). */
  close?(): Promise<void>;
}

/** Options of {@link describeFenceConformance}; every field is optional. */
export interface FenceConformanceOptions {
  /** Writers racing in the concurrency case. Default 24. */
  concurrentWriters?: number;
}

/** Every key of {@link FenceConformanceOptions}. */
const OPTION_KEYS = keysOf<FenceConformanceOptions>()(['concurrentWriters']);

const defaults: Required<FenceConformanceOptions> = { concurrentWriters: 24 };

/**
 * Registers a vitest `describe` block that checks a {@link FencedStore} against the fencing
 * contract. Run it on your own adapter the same way the built-in ones do:
 *
 * ```ts
 * describeFenceConformance('my store', async () => ({ store, reopen: async () => open() }));
 * ```
 *
 * Every case writes to its own resource name, so the suite can share a store with other data.
 */
export function describeFenceConformance(
  name: string,
  factory: () => FenceConformanceHarness | Promise<FenceConformanceHarness>,
  options: FenceConformanceOptions = {},
): void {
  checkObject('options', options, '{ concurrentWriters? }', OPTION_KEYS);
  // A key given as undefined counts as left out: its default applies.
  const concurrentWriters = options.concurrentWriters ?? defaults.concurrentWriters;
  const run = randomUUID().slice(0, 8);
  const resource = (label: string): string => `conformance/${run}/${label}`;

  describe(`fence conformance: ${name}`, () => {
    let harness: FenceConformanceHarness | undefined;
    const store = (): FencedStore => {
      if (harness === undefined) throw new Error('the conformance factory did not run');
      return harness.store;
    };

    beforeAll(async () => {
      harness = await factory();
    });
    afterAll(async () => {
      await harness?.close?.();
    });

    it('reports nothing for a resource never written', async () => {
      const r = resource('unknown');
      expect(await store().read(r)).toBeUndefined();
      expect(await store().highestToken(r)).toBeUndefined();
    });

    it('accepts the first write with any valid token', async () => {
      const r = resource('first');
      await store().write({ resource: r, token: 42n, value: 'a' });
      expect(await store().read(r)).toEqual({ value: 'a', token: 42n });
      expect(await store().highestToken(r)).toBe(42n);
    });

    it('rejects a lower token with StaleTokenError', async () => {
      const r = resource('stale');
      await store().write({ resource: r, token: 10n, value: 'new' });
      const err = await rejection(store().write({ resource: r, token: 9n, value: 'old' }));
      expect(isStaleTokenError(err)).toBe(true);
      const stale = err as StaleTokenError;
      expect(stale.resource).toBe(r);
      expect(stale.token).toBe(9n);
      expect([undefined, 10n]).toContain(stale.highestToken);
    });

    it('accepts an equal token (the same holder writing again)', async () => {
      const r = resource('equal');
      await store().write({ resource: r, token: 7n, value: 'first' });
      await store().write({ resource: r, token: 7n, value: 'second' });
      expect(await store().read(r)).toEqual({ value: 'second', token: 7n });
    });

    it('accepts a higher token', async () => {
      const r = resource('higher');
      await store().write({ resource: r, token: 7n, value: 'old' });
      await store().write({ resource: r, token: 8n, value: 'new' });
      expect(await store().read(r)).toEqual({ value: 'new', token: 8n });
      expect(await store().highestToken(r)).toBe(8n);
    });

    it('leaves no trace of a rejected write', async () => {
      const r = resource('no-trace');
      await store().write({ resource: r, token: 100n, value: 'kept' });
      await expect(store().write({ resource: r, token: 99n, value: 'lost' })).rejects.toSatisfy(
        isStaleTokenError,
      );
      expect(await store().read(r)).toEqual({ value: 'kept', token: 100n });
      expect(await store().highestToken(r)).toBe(100n);
      const other = await harness!.reopen();
      expect(await other.read(r)).toEqual({ value: 'kept', token: 100n });
    });

    it('ends with the highest token when writers race with shuffled tokens', async () => {
      const r = resource('race');
      const tokens = shuffle(
        Array.from({ length: concurrentWriters }, (_, i) => BigInt(i + 1)),
        0x5eed,
      );
      const outcomes = await Promise.allSettled(
        tokens.map((t) => store().write({ resource: r, token: t, value: `writer-${t}` })),
      );
      for (const outcome of outcomes) {
        if (outcome.status === 'rejected') expect(isStaleTokenError(outcome.reason)).toBe(true);
      }
      const top = BigInt(concurrentWriters);
      expect(await store().read(r)).toEqual({ value: `writer-${top}`, token: top });
      expect(await store().highestToken(r)).toBe(top);
      // The highest writer can never be rejected.
      expect(outcomes[tokens.indexOf(top)]?.status).toBe('fulfilled');
    });

    it('keeps accepted values and tokens across a new client', async () => {
      const r = resource('persist');
      await store().write({ resource: r, token: 500n, value: 'durable' });
      const other = await harness!.reopen();
      expect(await other.read(r)).toEqual({ value: 'durable', token: 500n });
      expect(await other.highestToken(r)).toBe(500n);
      await expect(other.write({ resource: r, token: 499n, value: 'late' })).rejects.toSatisfy(
        isStaleTokenError,
      );
      await other.write({ resource: r, token: 501n, value: 'next' });
      expect(await store().read(r)).toEqual({ value: 'next', token: 501n });
    });

    it('compares tokens above 2^53 exactly', async () => {
      const r = resource('big');
      // Equal as doubles: a store that compares numbers would accept the second write.
      await store().write({ resource: r, token: 9007199254740993n, value: 'big' });
      await expect(
        store().write({ resource: r, token: 9007199254740992n, value: 'rounded' }),
      ).rejects.toSatisfy(isStaleTokenError);
      await store().write({ resource: r, token: '9007199254740993', value: 'same holder' });
      expect(await store().read(r)).toEqual({ value: 'same holder', token: 9007199254740993n });

      await store().write({ resource: r, token: MAX_TOKEN, value: 'max' });
      expect(await store().highestToken(r)).toBe(MAX_TOKEN);
      await expect(
        store().write({ resource: r, token: MAX_TOKEN - 1n, value: 'max-1' }),
      ).rejects.toSatisfy(isStaleTokenError);
      expect(await store().read(r)).toEqual({ value: 'max', token: MAX_TOKEN });
    });

    it('orders tokens by value, not as strings', async () => {
      const r = resource('digits');
      await store().write({ resource: r, token: 99n, value: 'two digits' });
      await store().write({ resource: r, token: 100n, value: 'three digits' });
      await expect(store().write({ resource: r, token: 99n, value: 'again' })).rejects.toSatisfy(
        isStaleTokenError,
      );
      await expect(
        store().write({ resource: r, token: '900', value: 'x' }),
      ).resolves.toBeUndefined();
      expect(await store().highestToken(r)).toBe(900n);
    });

    it.each<[string, unknown]>([
      ['zero', 0n],
      ['negative', -1n],
      ['above int64', MAX_TOKEN + 1n],
      ['leading zero', '0100'],
      ['hex', '0x10'],
      ['fraction', 1.5],
      ['unsafe number', 2 ** 53],
      ['NaN', NaN],
      ['null', null],
    ])('rejects an invalid token (%s) and writes nothing', async (label, token) => {
      const r = resource(`invalid-${label}`);
      const err = await rejection(
        store().write({ resource: r, token: token as TokenInput, value: 'never' }),
      );
      expect(isInvalidTokenError(err)).toBe(true);
      expect(await store().read(r)).toBeUndefined();
      expect(await store().highestToken(r)).toBeUndefined();
    });

    it.each<[string, unknown]>([
      ['number', 42],
      ['undefined', undefined],
      ['null', null],
      ['object', { v: 1 }],
      ['Buffer', Buffer.from('x')],
    ])('rejects a value that is not a string (%s) and writes nothing', async (label, value) => {
      const r = resource(`bad-value-${label}`);
      const err = await rejection(
        store().write({ resource: r, token: 5n, value: value as string }),
      );
      expect(isInvalidArgumentError(err)).toBe(true);
      expect((err as Error).message).toMatch(/value/);
      expect(await store().read(r)).toBeUndefined();
      expect(await store().highestToken(r)).toBeUndefined();
    });

    it('keeps resources independent', async () => {
      const a = resource('independent-a');
      const b = resource('independent-b');
      await store().write({ resource: a, token: 1000n, value: 'a' });
      await store().write({ resource: b, token: 1n, value: 'b' });
      await expect(store().write({ resource: a, token: 999n, value: 'a-late' })).rejects.toSatisfy(
        isStaleTokenError,
      );
      expect(await store().read(a)).toEqual({ value: 'a', token: 1000n });
      expect(await store().read(b)).toEqual({ value: 'b', token: 1n });
    });
  });
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the write to be rejected, but it was accepted');
}

/** Deterministic Fisher-Yates so a failing interleaving can be reproduced. */
function shuffle<T>(items: T[], seed: number): T[] {
  let state = seed;
  const next = (): number => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 2 ** 32;
  };
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
