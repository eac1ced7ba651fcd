import { describe, expect, it } from 'vitest';
import {
  InvalidArgumentError as CoreInvalidArgumentError,
  isInvalidArgumentError as isCoreInvalidArgumentError,
  isLeaseholdError,
} from '@leasehold/core';
import { describeType as coreDescribeType, describeValue } from '@leasehold/core/internal';
import {
  FenceError,
  InvalidArgumentError,
  InvalidTokenError,
  StaleTokenError,
  describe as describeFenceValue,
  describeType,
  isFenceError,
  isInvalidArgumentError,
  isInvalidTokenError,
  isStaleTokenError,
} from './errors.js';
import { memoryStore } from './memory.js';

describe('errors', () => {
  it('StaleTokenError carries the resource and both tokens as bigints', () => {
    const err = new StaleTokenError('orders', 5n, 9007199254740993n);
    expect(err).toBeInstanceOf(FenceError);
    expect(err.name).toBe('StaleTokenError');
    expect(err.code).toBe('STALE_TOKEN');
    expect(err.resource).toBe('orders');
    expect(err.token).toBe(5n);
    expect(err.highestToken).toBe(9007199254740993n);
    expect(err.message).toContain('9007199254740993');
    expect(isStaleTokenError(err)).toBe(true);
    expect(isInvalidTokenError(err)).toBe(false);
  });

  it('InvalidTokenError names the value and what is allowed', () => {
    const err = new InvalidTokenError('007', 'not a canonical decimal string');
    expect(err.message).toContain('"007"');
    expect(err.message).toMatch(/ must be .*, got "007"/);
    expect(isInvalidTokenError(err)).toBe(true);
  });

  it('guards recognise errors from another copy of the package by their brand', () => {
    // What a duplicate copy's error looks like: a different class with the same global brand.
    const foreign = new Error('stale');
    Object.defineProperty(foreign, Symbol.for('leasehold.fence.error'), { value: 'STALE_TOKEN' });
    expect(isStaleTokenError(foreign)).toBe(true);
    expect(isFenceError(foreign)).toBe(true);
    expect(isStaleTokenError(new Error('stale'))).toBe(false);
    expect(isStaleTokenError(null)).toBe(false);
    expect(isStaleTokenError('STALE_TOKEN')).toBe(false);
  });

  it('fence guards reject errors branded by @leasehold/core, and core guards reject fence errors, except for bad input', () => {
    // Core's brand, past ('leasehold.error', once shared with fence) and present.
    for (const brand of ['leasehold.error', 'leasehold.core.error']) {
      const core = new Error('bad lock name');
      Object.defineProperty(core, Symbol.for(brand), { value: 'LOCK_TAKEN' });
      expect(isStaleTokenError(core), brand).toBe(false);
      expect(isFenceError(core), brand).toBe(false);
    }
    const fence = new InvalidArgumentError('bad table');
    expect(isLeaseholdError(fence)).toBe(false);
    expect(isLeaseholdError(new StaleTokenError('r', 1n, 2n))).toBe(false);
  });

  it("one guard for bad input: core and fence each answer for the other package's InvalidArgumentError", () => {
    const fence = new InvalidArgumentError('bad table');
    const core = new CoreInvalidArgumentError('bad lock name');
    let thrown: unknown;
    try {
      memoryStore('not a map' as never);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(InvalidArgumentError);
    for (const err of [thrown as Error, fence, core]) {
      expect(isInvalidArgumentError(err), err.message).toBe(true);
      expect(isCoreInvalidArgumentError(err), err.message).toBe(true);
    }
    expect(isInvalidArgumentError(new StaleTokenError('r', 1n, 2n))).toBe(false);
    expect(isCoreInvalidArgumentError(new InvalidTokenError(0, 'zero'))).toBe(false);
  });

  it('shows values in messages exactly as core does (a copy: the stores run without core)', () => {
    const values = ['x', 'y'.repeat(80), 5, 1.5, 7n, null, undefined, [], {}, () => 0, true];
    for (const value of values) expect(describeFenceValue(value)).toBe(describeValue(value));
  });

  it('names a value by its type only exactly as core does (for a misspelt option, maybe a secret)', () => {
    const values = ['x', 5, 7n, null, undefined, [], {}, () => 0, true, Symbol('s'), new Map()];
    for (const value of values) expect(describeType(value)).toBe(coreDescribeType(value));
    expect(values.map(describeType)).toEqual([
      'string',
      'number',
      'bigint',
      'null',
      'undefined',
      'an array',
      'object',
      'function',
      'boolean',
      'symbol',
      'object',
    ]);
  });
});
