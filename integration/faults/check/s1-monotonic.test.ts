import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder, log } from './fixtures.js';
import { checkMonotonic } from './s1-monotonic.js';

describe('S1: accepted tokens never decrease', () => {
  it('flags tokens 5, 7, 6 accepted in that order', () => {
    const context = createContext(
      [],
      {
        memory: log([
          ['w1', 5],
          ['w2', 7],
          ['w1', 6],
        ]),
      },
      CONFIG,
    );
    const violations = checkMonotonic(context);
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatchObject({
      rule: 'S1',
      token: '6',
      process: 'w1',
      resource: 'memory',
    });
    expect(violations[0]?.message).toContain('after token 7');
  });

  it('accepts non-decreasing tokens, repeats included', () => {
    const context = createContext(
      [],
      {
        memory: log([
          ['w1', 5],
          ['w1', 5],
          ['w2', 7],
          ['w3', 9],
        ]),
      },
      CONFIG,
    );
    expect(checkMonotonic(context)).toEqual([]);
  });

  it('reads the log in seq order, not array order', () => {
    const entries = log([
      ['w1', 5],
      ['w2', 7],
    ]).reverse();
    expect(checkMonotonic(createContext([], { redis: entries }, CONFIG))).toEqual([]);
  });

  it('judges each name and resource on its own', () => {
    const logs = {
      memory: log([
        ['w1', 9, 'A'],
        ['w2', 3, 'B'],
      ]),
      postgres: log([
        ['w2', 3, 'B'],
        ['w1', 9, 'A'],
      ]),
    };
    expect(checkMonotonic(createContext([], logs, CONFIG))).toEqual([]);
  });

  it('compares tokens as 64-bit integers, not strings or doubles', () => {
    const big = (2n ** 63n).toString();
    const logs = {
      memory: log([
        ['w1', 9],
        ['w2', 10],
      ]).concat([{ seq: 3, name: 'L', token: big, writeId: 'b', process: 'w3' }]),
    };
    expect(checkMonotonic(createContext([], logs, CONFIG))).toEqual([]);
    logs.memory.push({
      seq: 4,
      name: 'L',
      token: (2n ** 63n - 1n).toString(),
      writeId: 'c',
      process: 'w1',
    });
    expect(checkMonotonic(createContext([], logs, CONFIG))).toHaveLength(1);
  });

  it('leaves election writes to S4 and dates a violation from the history', () => {
    const b = new HistoryBuilder();
    b.write('w1', { token: 5, at: 10, workload: 'election' });
    b.write('w2', { token: 7, at: 20, workload: 'election' });
    b.write('w1', { token: 6, at: 30, workload: 'election' });
    expect(checkMonotonic(createContext(b.lines, b.logsFromAcks(), CONFIG))).toEqual([]);

    const l = new HistoryBuilder();
    l.write('w1', { token: 7, at: 10 });
    l.write('w2', { token: 6, at: 30 });
    const [violation] = checkMonotonic(createContext(l.lines, l.logsFromAcks(), CONFIG));
    expect(violation?.at).toBe(l.lines[3]?.at);
  });
});
