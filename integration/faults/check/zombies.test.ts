import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder } from './fixtures.js';
import { findZombies } from './zombies.js';

describe('zombie writes', () => {
  it('counts writes made after a newer token was granted, by outcome', () => {
    const b = new HistoryBuilder().acquire('w1', 'L', 5, 0).acquire('w2', 'L', 7, 3000);
    b.write('w1', { token: 5, at: 100 }); // before the takeover: not a zombie
    b.write('w1', { token: 5, at: 3100, outcome: 'stale' });
    b.write('w1', { token: 5, at: 3200, outcome: 'lost' });
    b.write('w2', { token: 7, at: 3250, resource: 'redis' }); // the current holder: not a zombie
    b.write('w1', { token: 5, at: 3300, outcome: 'ok', resource: 'redis' });
    b.write('w1', { token: 5, at: 3400, outcome: 'timeout' });
    const stats = findZombies(createContext(b.lines, b.logsFromAcks(), CONFIG));
    expect(stats).toMatchObject({ attempted: 4, rejected: 1, prevented: 1, accepted: 1, other: 1 });
    expect(stats.writes.find((w) => w.outcome === 'accepted')).toMatchObject({
      resource: 'redis',
      supersededBy: { process: 'w2', token: '7' },
    });
  });

  it('counts a zombie that reached the resource before any newer token apart, as safe', () => {
    const b = new HistoryBuilder().acquire('w1', 'L', 5, 0).acquire('w2', 'L', 7, 3000);
    b.write('w1', { token: 5, at: 3100, outcome: 'ok' }); // w2 has not written yet
    b.write('w2', { token: 7, at: 3200 });
    const stats = findZombies(createContext(b.lines, b.logsFromAcks(), CONFIG));
    expect(stats).toMatchObject({ attempted: 1, accepted: 0, landedFirst: 1 });
  });

  it('keeps locks, terms and names apart and leaves cron out', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'A', 5, 0)
      .acquire('w2', 'B', 7, 100)
      .acquire('w3', 'E', 9, 100, { workload: 'election' });
    b.write('w1', { name: 'A', token: 5, at: 200 });
    // The one zombie: term E had token 9 by then.
    b.write('w1', { name: 'E', token: 5, at: 200, workload: 'election' });
    b.write('w4', { name: 'job', token: 2, at: 300, workload: 'cron' });
    expect(findZombies(createContext(b.lines, {}, CONFIG)).attempted).toBe(1);
  });
});
