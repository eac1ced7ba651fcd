import { describe, expect, it } from 'vitest';
import { isInvalidArgumentError } from './errors.js';
import { quoteIdentifier } from './identifier.js';

describe('quoteIdentifier', () => {
  it.each([
    ['fence', '"fence"'],
    ['_Leasehold_2', '"_Leasehold_2"'],
  ])('quotes %s', (name, quoted) => {
    expect(quoteIdentifier(name, 'column')).toBe(quoted);
  });

  it('accepts schema.table only where allowed', () => {
    expect(quoteIdentifier('app.orders', 'table', true)).toBe('"app"."orders"');
    expect(() => quoteIdentifier('app.orders', 'column')).toThrow(
      /^column must be a name matching .*, got "app.orders"$/,
    );
  });

  it.each(['', '1abc', 'a-b', 'a b', 'x"; drop table t; --', 'a.b.c', 'é', 'a.'])(
    'rejects %j',
    (name) => {
      let caught: unknown;
      try {
        quoteIdentifier(name, 'table', true);
      } catch (err) {
        caught = err;
      }
      expect(isInvalidArgumentError(caught)).toBe(true);
      expect((caught as Error).message).toMatch(/^table must be .*, got /);
    },
  );

  it('rejects non-strings', () => {
    expect(() => quoteIdentifier(42, 'table')).toThrow(/^table must be .*, got 42$/);
  });
});
