import { describe, expect, it } from 'vitest';
import {
  FenceError,
  InvalidTokenError,
  StaleTokenError,
  isFenceError,
  isInvalidTokenError,
  isStaleTokenError,
} from './errors.js';

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
    expect(err.message).toContain('allowed');
    expect(isInvalidTokenError(err)).toBe(true);
  });

  it('guards recognise errors from another copy of the package by their brand', () => {
    // What a duplicate copy's error looks like: a different class with the same global brand.
    const foreign = new Error('stale');
    Object.defineProperty(foreign, Symbol.for('leasehold.error'), { value: 'STALE_TOKEN' });
    expect(isStaleTokenError(foreign)).toBe(true);
    expect(isFenceError(foreign)).toBe(true);
    expect(isStaleTokenError(new Error('stale'))).toBe(false);
    expect(isStaleTokenError(null)).toBe(false);
    expect(isStaleTokenError('STALE_TOKEN')).toBe(false);
  });
});
