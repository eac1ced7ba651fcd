import { describe, expect, it } from 'vitest';
import type { HistoryLine, Violation } from './check/index.js';
import { excuseLateSignals, MAX_EXCUSED_LAG_MS } from './lag.js';

const line = (fields: Partial<HistoryLine> & { loopLagMs?: number }): HistoryLine =>
  ({ process: 'w1', pid: 1, seq: 1, type: 'info', token: '5', ...fields }) as HistoryLine;

/** w1's hold (token 5) with its deadline at 1000, lost at `lostAt` with `loopLagMs` reported. */
const history = (lostAt: number, loopLagMs: number): HistoryLine[] => [
  line({ at: 0, type: 'ok', op: 'acquire', deadlineAt: 1000 }),
  line({ at: lostAt, op: 'lost', loopLagMs }),
];
const late: Violation = { rule: 'S5', kind: 'late-signal', process: 'w1', token: '5', message: '' };

describe('late loss signals the machine caused', () => {
  it('excuses a signal late by no more than the tolerance plus the process’s own loop lag', () => {
    const { unexcused, excused } = excuseLateSignals([late], history(1900, 700), 250);
    expect(unexcused).toEqual([]);
    expect(excused).toMatchObject([{ latenessMs: 900, loopLagMs: 700 }]);
  });

  it('does not excuse lateness the lag does not explain, nor lag beyond the cap', () => {
    expect(excuseLateSignals([late], history(2500, 700), 250).unexcused).toEqual([late]);
    const capped = 1000 + 250 + MAX_EXCUSED_LAG_MS + 100;
    expect(excuseLateSignals([late], history(capped, 10_000), 250).unexcused).toEqual([late]);
  });

  it('never excuses two processes believing at once, or a hold used without a signal', () => {
    for (const kind of ['overlap', 'unsignalled'] as const) {
      const v: Violation = { ...late, kind };
      expect(excuseLateSignals([v], history(1100, 5000), 250).unexcused).toEqual([v]);
    }
  });
});
