import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder } from './fixtures.js';
import { checkFenceLiveness } from './fence-liveness.js';

const check = (b: HistoryBuilder) =>
  checkFenceLiveness(createContext(b.lines, b.logsFromAcks(), CONFIG));

describe('liveness of the fence: a current holder’s write is accepted', () => {
  it('flags a stale rejection with no larger token accepted before it (its own second write)', () => {
    const b = new HistoryBuilder().acquire('w1', 'L', 5, 0);
    b.write('w1', { token: 5, at: 10 });
    b.write('w1', { token: 5, at: 300, outcome: 'stale' });
    expect(check(b)).toMatchObject([
      { rule: 'liveness', kind: 'fence', process: 'w1', token: '5' },
    ]);
  });

  it('accepts a rejection after a larger token was accepted for the name on that resource', () => {
    const b = new HistoryBuilder().acquire('w1', 'L', 5, 0);
    b.write('w1', { token: 5, at: 10 });
    b.write('w2', { token: 9, at: 100 });
    b.write('w1', { token: 5, at: 300, outcome: 'stale' });
    expect(check(b)).toEqual([]);
    // A larger token on another resource, or for another name, or sent after, does not count.
    const other = new HistoryBuilder().acquire('w1', 'L', 5, 0);
    other.write('w2', { token: 9, at: 100, resource: 'redis' });
    other.write('w2', { token: 9, at: 110, name: 'M' });
    other.write('w1', { token: 5, at: 300, outcome: 'stale' });
    other.write('w2', { token: 9, at: 400 });
    expect(check(other)).toHaveLength(1);
  });
});
