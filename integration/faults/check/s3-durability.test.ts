import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder } from './fixtures.js';
import { checkDurability } from './s3-durability.js';

describe('S3: acknowledged writes present, rejected writes absent', () => {
  it('accepts a log holding exactly the acknowledged writes', () => {
    const b = new HistoryBuilder();
    b.write('w1', { token: 5, at: 10 });
    b.write('w1', { token: 5, at: 20, outcome: 'stale' });
    b.write('w1', { token: 5, at: 30, outcome: 'lost' });
    b.write('w1', { token: 5, at: 40, outcome: 'timeout' });
    expect(checkDurability(createContext(b.lines, b.logsFromAcks(), CONFIG))).toEqual([]);
  });

  it('flags an acknowledged write missing from the log', () => {
    const b = new HistoryBuilder();
    b.write('w1', { token: 5, at: 10 });
    const lostId = b.write('w1', { token: 5, at: 20, resource: 'redis' });
    const logs = b.logsFromAcks();
    logs.redis = [];
    const violations = checkDurability(createContext(b.lines, logs, CONFIG));
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatchObject({
      rule: 'S3',
      resource: 'redis',
      process: 'w1',
      token: '5',
    });
    expect(violations[0]?.message).toContain(`acknowledged write ${lostId}`);
  });

  it('flags a rejected write that is in the log anyway', () => {
    for (const outcome of ['stale', 'lost'] as const) {
      const b = new HistoryBuilder();
      const id = b.write('w1', { token: 3, at: 10, outcome });
      const logs = { memory: [{ seq: 1, name: 'L', token: '3', writeId: id, process: 'w1' }] };
      const violations = checkDurability(createContext(b.lines, logs, CONFIG));
      expect(violations).toHaveLength(1);
      expect(violations[0]?.message).toContain(`failed as "${outcome}"`);
    }
  });

  it('lets a write of unknown outcome be present or absent', () => {
    const b = new HistoryBuilder();
    const id = b.write('w1', { token: 3, at: 10, outcome: 'info' });
    const present = { memory: [{ seq: 1, name: 'L', token: '3', writeId: id, process: 'w1' }] };
    expect(checkDurability(createContext(b.lines, present, CONFIG))).toEqual([]);
    expect(checkDurability(createContext(b.lines, { memory: [] }, CONFIG))).toEqual([]);
  });

  it('flags a write applied twice and one logged with another token', () => {
    const b = new HistoryBuilder();
    const id = b.write('w1', { token: 3, at: 10 });
    const twice = {
      memory: [
        { seq: 1, name: 'L', token: '3', writeId: id, process: 'w1' },
        { seq: 2, name: 'L', token: '3', writeId: id, process: 'w1' },
      ],
    };
    expect(checkDurability(createContext(b.lines, twice, CONFIG))[0]?.message).toContain('2 times');
    const wrong = { memory: [{ seq: 1, name: 'L', token: '4', writeId: id, process: 'w1' }] };
    expect(checkDurability(createContext(b.lines, wrong, CONFIG))[0]?.message).toContain(
      'with token 4',
    );
  });
});
