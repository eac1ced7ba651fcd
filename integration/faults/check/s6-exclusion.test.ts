import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder } from './fixtures.js';
import { checkExclusion } from './s6-exclusion.js';

const check = (b: HistoryBuilder) =>
  checkExclusion(createContext(b.lines, b.logsFromAcks(), CONFIG));

describe('S6: no two processes believe at once', () => {
  it('flags two processes believing they hold the same lock, whatever faults the run has', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .fault('pause-holder', 'w3', 100, 3000)
      .acquire('w2', 'L', 7, 1000, { deadlineMs: 2000 })
      .lost('w1', 5, 1900, { deadlineAt: 1000 })
      .release('w2', 'L', 2500);
    expect(check(b)).toMatchObject([{ rule: 'S6', kind: 'lock', process: 'w1', token: '5' }]);
    expect(check(b)[0]?.message).toMatch(
      /w1 \(token 5\) and w2 \(token 7\) both believed .* for 900 ms/,
    );
  });

  it('accepts hand-overs, and overlap within the earlier holder’s measured lag', () => {
    const handover = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .release('w1', 'L', 900)
      .acquire('w2', 'L', 7, 905, { deadlineMs: 2000 });
    expect(check(handover)).toEqual([]);
    const lagged = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .acquire('w2', 'L', 7, 1000, { deadlineMs: 2000 })
      .lag('w1', 1099, 120)
      .lost('w1', 5, 1100, { deadlineAt: 990 });
    expect(check(lagged)).toEqual([]);
  });

  it('excuses a frozen holder only until its first read after the freeze', () => {
    const frozen = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .fault('pause-holder', 'w1', 500, 3500)
      .acquire('w2', 'L', 7, 2000, { deadlineMs: 2000 })
      .check('w1', 5, 3510, false, 1500);
    expect(check(frozen)).toEqual([]);
    // Its first read after the freeze said "held" (the SDK missed the deadline): from then on
    // the belief counts.
    const stillHeld = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .fault('stall-loop', 'w1', 500, 3500)
      .acquire('w2', 'L', 7, 2000, { deadlineMs: 2000 })
      .check('w1', 5, 3510, true, 1500)
      .release('w1', 'L', 3900)
      .release('w2', 'L', 4000);
    expect(check(stillHeld)).toMatchObject([{ rule: 'S6', process: 'w1' }]);
    expect(check(stillHeld)[0]?.message).toContain('for 390 ms');
  });

  it('allows the earlier holder’s own round trip after a deletion fault', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .rtt('w1', 400, 30)
      .fault('delete-key', 'w1', 500, 540, { token: '5', sentAt: 500, ackAt: 530 })
      .acquire('w2', 'L', 7, 520, { deadlineMs: 2000 })
      .lost('w1', 5, 630, { deadlineAt: 2000, detail: 'deleted' });
    // On time only with its round trip: 530 + 30, + 40 ms for the runner and for w1.
    expect(check(b)).toEqual([]);
    const late = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .rtt('w1', 400, 30)
      .fault('delete-key', 'w1', 500, 540, { token: '5', sentAt: 500, ackAt: 530 })
      .acquire('w2', 'L', 7, 520, { deadlineMs: 2000 })
      .lost('w1', 5, 700, { deadlineAt: 2000, detail: 'deleted' })
      .release('w2', 'L', 900);
    expect(check(late)).toMatchObject([{ rule: 'S6', process: 'w1' }]);
  });

  it('applies to election terms too', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'E', 5, 0, { deadlineMs: 2000, workload: 'election' })
      .acquire('w2', 'E', 7, 500, { deadlineMs: 2000, workload: 'election' })
      .release('w1', 'E', 1500, 'election')
      .release('w2', 'E', 2500, 'election');
    expect(check(b)).toMatchObject([{ rule: 'S6', kind: 'term' }]);
    expect(check(b)[0]?.message).toContain('term "E"');
  });
});
