import { describe, expect, it } from 'vitest';
import { isInvalidTokenError } from './errors.js';
import { MAX_TOKEN, parseToken, tokenToString, type TokenInput } from './token.js';

const accepted: [TokenInput, bigint][] = [
  [1n, 1n],
  [MAX_TOKEN, MAX_TOKEN],
  ['1', 1n],
  ['42', 42n],
  ['9007199254740993', 9007199254740993n],
  ['9223372036854775807', MAX_TOKEN],
  [1, 1n],
  [Number.MAX_SAFE_INTEGER, 9007199254740991n],
];

const rejected: [label: string, value: unknown][] = [
  ['bigint zero', 0n],
  ['negative bigint', -5n],
  ['bigint above int64', MAX_TOKEN + 1n],
  ['number zero', 0],
  ['negative number', -1],
  ['negative zero', -0],
  ['fraction', 1.5],
  ['NaN', NaN],
  ['Infinity', Infinity],
  ['-Infinity', -Infinity],
  ['number above 2^53-1', 2 ** 53],
  ['huge number', 1e300],
  ['empty string', ''],
  ['string zero', '0'],
  ['leading zero', '007'],
  ['leading space', ' 7'],
  ['trailing newline', '7\n'],
  ['plus sign', '+7'],
  ['minus sign', '-7'],
  ['hex', '0x1f'],
  ['exponent', '1e5'],
  ['decimal point', '7.0'],
  ['underscore', '1_000'],
  ['string above int64', '9223372036854775808'],
  ['very long string', '1'.repeat(400)],
  ['null', null],
  ['undefined', undefined],
  ['boolean', true],
  ['object', { token: 1 }],
];

describe('parseToken', () => {
  it.each(accepted)('accepts %s', (input, expected) => {
    expect(parseToken(input)).toBe(expected);
  });

  it.each(rejected)('rejects %s', (_label, value) => {
    let caught: unknown;
    try {
      parseToken(value as TokenInput);
    } catch (err) {
      caught = err;
    }
    expect(isInvalidTokenError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(
      /^fencing token must be a bigint in \[1, 2\^63-1\], .+, got .+: .+$/,
    );
  });
});

describe('tokenToString', () => {
  it('round-trips the canonical form exactly above 2^53', () => {
    expect(tokenToString(9007199254740993n)).toBe('9007199254740993');
    expect(tokenToString('9223372036854775807')).toBe('9223372036854775807');
    expect(parseToken(tokenToString(MAX_TOKEN))).toBe(MAX_TOKEN);
  });
});
