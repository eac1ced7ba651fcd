import { describe, expect, it } from 'vitest';
import { describeFenceConformance } from './conformance.js';
import { isInvalidArgumentError, isStaleTokenError } from './errors.js';
import { memoryStore, withFence, type MemoryState } from './memory.js';

const shared: MemoryState = new Map();
describeFenceConformance('memory', () => ({
  store: memoryStore(shared),
  reopen: async () => memoryStore(shared),
}));
// Every option of the suite, set: accepted.
const again: MemoryState = new Map();
describeFenceConformance(
  'memory, every option',
  () => ({ store: memoryStore(again), reopen: async () => memoryStore(again) }),
  { concurrentWriters: 5 },
);

describe('memory state argument', () => {
  it('memoryStore and withFence refuse a state that is not a Map, at the call', () => {
    for (const bad of ['state', ['r'], 5, {}, null]) {
      for (const call of [
        () => memoryStore(bad as never),
        () => withFence(bad as never, { resource: 'r', token: 1n }, () => undefined),
      ]) {
        let caught: unknown;
        try {
          call();
        } catch (err) {
          caught = err;
        }
        expect(isInvalidArgumentError(caught)).toBe(true);
        expect((caught as Error).message).toMatch(/^state must be a Map of resource states, got /);
      }
    }
  });
});

describe('memory withFence', () => {
  it('runs the write only for an accepted token', () => {
    const state: MemoryState = new Map();
    let applied = 0;
    withFence(state, { resource: 'r', token: 5n }, () => applied++);
    expect(() => withFence(state, { resource: 'r', token: 4n }, () => applied++)).toThrow(
      /stale fencing token 4/,
    );
    expect(applied).toBe(1);
  });

  it('does not record the token when the write throws', async () => {
    const state: MemoryState = new Map();
    withFence(state, { resource: 'r', token: 5n }, () => undefined);
    expect(() =>
      withFence(state, { resource: 'r', token: 9n }, () => {
        throw new Error('write failed');
      }),
    ).toThrow('write failed');
    expect(await memoryStore(state).highestToken('r')).toBe(5n);
    let caught: unknown;
    try {
      withFence(state, { resource: 'r', token: 4n }, () => undefined);
    } catch (err) {
      caught = err;
    }
    expect(isStaleTokenError(caught)).toBe(true);
  });

  it('refuses an empty resource name', () => {
    expect(() => withFence(new Map(), { resource: '', token: 1n }, () => undefined)).toThrow(
      /must be a non-empty string/,
    );
  });

  it('names the object style when called the positional way', () => {
    let caught: unknown;
    try {
      const positional = withFence as (...args: unknown[]) => unknown;
      positional(new Map(), 'r', 1n, () => undefined);
    } catch (err) {
      caught = err;
    }
    expect(isInvalidArgumentError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(
      /^fence must be an object \{ resource, token, ... \} as the second argument, got "r"$/,
    );
  });
});
