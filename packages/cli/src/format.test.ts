import { describe, expect, it } from 'vitest';
import { formatDuration, printable, quotedValue, table, toJson } from './format.js';

describe('formatDuration', () => {
  it.each([
    [0, '0ms'],
    [999, '999ms'],
    [1_000, '1s'],
    [59_999, '59s'],
    [60_000, '1m00s'],
    [184_000, '3m04s'],
    [7_500_000, '2h05m'],
    [277_200_000, '3d05h'],
    [-1, '?'],
    [Number.NaN, '?'],
  ])('%d ms → %s', (ms, text) => expect(formatDuration(ms)).toBe(text));
});

describe('printable', () => {
  it('escapes control characters so a value cannot drive the terminal', () => {
    expect(printable('a\x1b[2Jb\nc\td\x07')).toBe('a\\u001b[2Jb\\nc\\td\\u0007');
  });
  it('cuts long values with an ellipsis, counting characters not UTF-16 units', () => {
    expect(printable('x'.repeat(50), 10)).toBe(`${'x'.repeat(9)}…`);
    expect(printable('😀'.repeat(5), 5)).toBe('😀'.repeat(5));
  });
  it('quotes values and names the empty one (etcdctl lock writes no value)', () => {
    expect(quotedValue('web-3:4711')).toBe('"web-3:4711"');
    expect(quotedValue('')).toBe('(no value)');
  });
});

describe('table', () => {
  it('aligns columns and leaves no trailing spaces', () => {
    expect(
      table([
        ['NAME', 'TOKEN', 'X'],
        ['deploy', '812', ''],
        ['a', '7', 'z'],
      ]),
    ).toEqual(['NAME    TOKEN  X', 'deploy  812', 'a       7      z']);
  });
});

it('writes bigints as decimal strings in JSON', () => {
  expect(toJson({ token: 2n ** 64n })).toBe('{"token":"18446744073709551616"}');
});
