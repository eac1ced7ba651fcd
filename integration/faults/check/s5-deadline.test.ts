import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder } from './fixtures.js';
import { checkDeadlines } from './s5-deadline.js';

const check = (b: HistoryBuilder, faults: string[] = []) =>
  checkDeadlines(createContext(b.lines, b.logsFromAcks(), { ...CONFIG, faults }));

describe('S5: the loss signal is on time', () => {
  it('flags a loss signalled after deadline + tolerance', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .lost('w1', 5, 1800);
    const violations = check(b);
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatchObject({ rule: 'S5', process: 'w1', token: '5' });
    expect(violations[0]?.message).toContain('300 ms after its local deadline');
  });

  it('accepts a loss within the tolerance, using the latest reported deadline', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .deadline('w1', 5, 600, 2100)
      .lost('w1', 5, 2300);
    expect(check(b)).toEqual([]);
    const honours = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .deadline('w1', 5, 600, 2100)
      .lost('w1', 5, 2400);
    expect(check(honours)).toHaveLength(1);
  });

  it('excludes holds marked paused and processes under a pause or stall fault', () => {
    const paused = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500, paused: true })
      .lost('w1', 5, 5000);
    expect(check(paused, ['pause-holder'])).toEqual([]);
    for (const fault of ['pause-holder', 'stall-loop']) {
      const b = new HistoryBuilder()
        .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
        .fault(fault, 'w1', 100, 4000)
        .lost('w1', 5, 4010);
      expect(check(b, [fault])).toEqual([]);
    }
    const other = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .fault('stall-loop', 'w2', 100, 4000)
      .lost('w1', 5, 4010);
    expect(check(other, ['stall-loop'])).toHaveLength(1);
  });

  it('flags a hold still used past its deadline with no signal at all', () => {
    const b = new HistoryBuilder().acquire('w1', 'L', 5, 0, { deadlineMs: 1000 });
    b.write('w1', { token: 5, at: 500 });
    b.write('w1', { token: 5, at: 1600 });
    b.release('w1', 'L', 1700);
    const violations = check(b);
    expect(violations.length).toBeGreaterThan(0);
    expect(violations[0]?.message).toContain('still in use 600 ms after');
  });

  it('flags two processes believing they hold the same lock in a run without pauses', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .acquire('w2', 'L', 7, 1000, { deadlineMs: 2000 })
      .lost('w1', 5, 1900);
    const violations = check(b);
    expect(violations).toHaveLength(1);
    expect(violations[0]?.message).toMatch(
      /w1 \(token 5\) and w2 \(token 7\) both believed .* for 900 ms/,
    );
  });

  it('accepts hand-overs, and overlaps in runs with pauses', () => {
    const handover = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .release('w1', 'L', 900)
      .acquire('w2', 'L', 7, 905, { deadlineMs: 2000 })
      .lost('w2', 7, 2900);
    expect(check(handover)).toEqual([]);
    const overlapWithPause = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000, paused: true })
      .acquire('w2', 'L', 7, 1000, { deadlineMs: 2000 })
      .lost('w1', 5, 1900);
    expect(check(overlapWithPause, ['pause-holder'])).toEqual([]);
  });

  it('applies to election terms too', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'E', 5, 0, { deadlineMs: 2000, workload: 'election' })
      .acquire('w2', 'E', 7, 500, { deadlineMs: 2000, workload: 'election' })
      .release('w1', 'E', 1500, 'election');
    expect(check(b)[0]?.message).toContain('term "E"');
  });
});
