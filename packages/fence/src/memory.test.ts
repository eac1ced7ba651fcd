import { describe, expect, it } from 'vitest';
import { describeFenceConformance } from './conformance.js';
import { isStaleTokenError } from './errors.js';
import { MemoryStore, type MemoryState } from './memory.js';

const state: MemoryState = new Map();
describeFenceConformance('memory', () => ({
  store: new MemoryStore(state),
  reopen: async () => new MemoryStore(state),
}));

describe('MemoryStore.withFence', () => {
  it('runs the write only for an accepted token', () => {
    const store = new MemoryStore();
    let applied = 0;
    store.withFence('r', 5n, () => applied++);
    expect(() => store.withFence('r', 4n, () => applied++)).toThrow(/stale fencing token 4/);
    expect(applied).toBe(1);
  });

  it('does not record the token when the write throws', async () => {
    const store = new MemoryStore();
    store.withFence('r', 5n, () => undefined);
    expect(() =>
      store.withFence('r', 9n, () => {
        throw new Error('write failed');
      }),
    ).toThrow('write failed');
    expect(await store.highestToken('r')).toBe(5n);
    let caught: unknown;
    try {
      store.withFence('r', 4n, () => undefined);
    } catch (err) {
      caught = err;
    }
    expect(isStaleTokenError(caught)).toBe(true);
  });

  it('refuses an empty resource name', () => {
    expect(() => new MemoryStore().withFence('', 1n, () => undefined)).toThrow(
      /must be a non-empty string/,
    );
  });
});
