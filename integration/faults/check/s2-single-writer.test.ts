import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, log } from './fixtures.js';
import { checkSingleWriter } from './s2-single-writer.js';

const check = (entries: Parameters<typeof log>[0]) =>
  checkSingleWriter(createContext([], { postgres: log(entries) }, CONFIG));

describe('S2: one writer per token, writes contiguous', () => {
  it('flags two processes writing with the same token', () => {
    const violations = check([
      ['w1', 5],
      ['w2', 5],
    ]);
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatchObject({
      rule: 'S2',
      process: 'w2',
      token: '5',
      resource: 'postgres',
    });
    expect(violations[0]?.message).toContain('and by w1');
  });

  it("flags a token that writes again after another token's write", () => {
    const violations = check([
      ['w1', 5],
      ['w2', 7],
      ['w1', 5],
    ]);
    expect(violations).toHaveLength(1);
    expect(violations[0]?.message).toContain('not contiguous');
  });

  it('accepts one writer per token in contiguous runs', () => {
    expect(
      check([
        ['w1', 5],
        ['w1', 5],
        ['w2', 7],
        ['w2', 7],
        ['w1', 9],
      ]),
    ).toEqual([]);
  });

  it('keeps names apart', () => {
    expect(
      check([
        ['w1', 5, 'A'],
        ['w2', 7, 'B'],
        ['w1', 5, 'A'],
      ]),
    ).toEqual([]);
  });
});
