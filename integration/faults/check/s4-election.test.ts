import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder } from './fixtures.js';
import { checkElectionWrites } from './s4-election.js';

describe('S4: leader writes obey S1 and S2 with election tokens', () => {
  it('flags a term writing after a newer term (5, 7, 6)', () => {
    const b = new HistoryBuilder();
    b.write('w1', { token: 5, at: 10, workload: 'election', name: 'E' });
    b.write('w2', { token: 7, at: 20, workload: 'election', name: 'E' });
    b.write('w1', { token: 6, at: 30, workload: 'election', name: 'E' });
    const violations = checkElectionWrites(createContext(b.lines, b.logsFromAcks(), CONFIG));
    expect(violations.map((v) => v.rule)).toEqual(['S4']);
    expect(violations[0]?.token).toBe('6');
  });

  it('flags two leaders sharing a token, using the workload the log itself names', () => {
    const logs = {
      memory: [
        { seq: 1, name: 'E', token: '5', writeId: 'a', process: 'w1', workload: 'election' },
        { seq: 2, name: 'E', token: '5', writeId: 'b', process: 'w2', workload: 'election' },
      ],
    };
    expect(checkElectionWrites(createContext([], logs, CONFIG)).map((v) => v.rule)).toEqual(['S4']);
  });

  it('accepts ordered terms and ignores lock writes', () => {
    const b = new HistoryBuilder();
    b.write('w1', { token: 5, at: 10, workload: 'election', name: 'E' });
    b.write('w2', { token: 7, at: 20, workload: 'election', name: 'E' });
    b.write('w1', { token: 9, at: 30 });
    b.write('w2', { token: 8, at: 40 });
    expect(checkElectionWrites(createContext(b.lines, b.logsFromAcks(), CONFIG))).toEqual([]);
  });
});
