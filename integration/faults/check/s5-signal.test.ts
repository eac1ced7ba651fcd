import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder } from './fixtures.js';
import { checkSignals } from './s5-signal.js';

const check = (b: HistoryBuilder) => checkSignals(createContext(b.lines, b.logsFromAcks(), CONFIG));

describe('S5: the SDK tells a holder of its loss in time', () => {
  it('flags a loss signalled later than its raw deadline + the lag measured + resolution', () => {
    const late = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .lost('w1', 5, 1600, { deadlineAt: 1500 });
    expect(check(late)).toMatchObject([{ rule: 'S5', kind: 'late-signal', token: '5' }]);
    expect(check(late)[0]?.message).toContain('100 ms after its local deadline (allowed 40 ms');
    // The same lateness is on time for a process whose timers could not run: it measured lag.
    const lagged = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .lag('w1', 1598, 90)
      .lost('w1', 5, 1600, { deadlineAt: 1500 });
    expect(check(lagged)).toEqual([]);
    // Lag before the deadline explains nothing, and a block not yet ticked counts (`lagNow`).
    const before = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .lag('w1', 1400, 900)
      .lost('w1', 5, 1600, { deadlineAt: 1500 });
    expect(check(before)).toHaveLength(1);
    const overdue = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .lost('w1', 5, 1600, { deadlineAt: 1500, lagNow: 95 });
    expect(check(overdue)).toEqual([]);
  });

  it('uses the deadline on the lost line, not a stale earlier one', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .deadline('w1', 5, 600, 2100)
      .lost('w1', 5, 2110, { deadlineAt: 2100 });
    expect(check(b)).toEqual([]);
  });

  it('flags a read that said "held" once the clock had passed the deadline, lag or not', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .lag('w1', 1600, 5000)
      .check('w1', 5, 1400, true, 1500)
      .check('w1', 5, 1501, true, 1500);
    expect(check(b)).toMatchObject([{ kind: 'held-after-deadline', process: 'w1' }]);
    const fine = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .check('w1', 5, 1400, true, 2100)
      .check('w1', 5, 2200, false, 2100);
    expect(check(fine)).toEqual([]);
  });

  it('flags a hold still used past its deadline with no signal at all', () => {
    const b = new HistoryBuilder().acquire('w1', 'L', 5, 0, { deadlineMs: 1000 });
    b.write('w1', { token: 5, at: 500, deadlineAt: 1000 });
    b.write('w1', { token: 5, at: 1600, deadlineAt: 1000 });
    b.release('w1', 'L', 1700);
    expect(check(b)).toMatchObject([{ kind: 'unsignalled', token: '5' }]);
    expect(check(b)[0]?.message).toContain('still in use 600 ms after');
  });

  it('excuses a frozen process only until it runs again: then the signal is due at once', () => {
    // Frozen from 500 to 3000 (its ticker ran 2500 ms late); the deadline passed at 1500.
    const b = new HistoryBuilder().acquire('w1', 'L', 5, 0, { deadlineMs: 1500 });
    b.lag('w1', 3000, 2500);
    b.write('w1', { token: 5, at: 3005, deadlineAt: 1500 });
    b.release('w1', 'L', 3100);
    expect(check(b)).toMatchObject([{ kind: 'unsignalled', at: 1_700_000_003_100 }]);
    const signalled = new HistoryBuilder().acquire('w1', 'L', 5, 0, { deadlineMs: 1500 });
    signalled.lag('w1', 3000, 2500);
    signalled.write('w1', { token: 5, at: 3005, deadlineAt: 1500 });
    signalled.lost('w1', 5, 3008, { deadlineAt: 1500 });
    expect(check(signalled)).toEqual([]);
  });

  it('holds a deletion to its acknowledgement + the holder’s own round trip, not to the deadline', () => {
    const late = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .rtt('w1', 100, 8)
      .fault('delete-key', 'w1', 200, 215, { token: '5', sentAt: 201, ackAt: 211 })
      .lost('w1', 5, 400, { deadlineAt: 1500, detail: 'deleted' });
    expect(check(late)).toMatchObject([{ kind: 'late-deletion-signal', token: '5' }]);
    const onTime = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .rtt('w1', 100, 8)
      .fault('revoke-lease', 'w1', 200, 215, { token: '5', sentAt: 201, ackAt: 211 })
      .lost('w1', 5, 235, { deadlineAt: 1500, detail: 'deleted' });
    expect(check(onTime)).toEqual([]);
    // A holder whose reads took 50 ms just then gets its news that much later.
    const slow = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .rtt('w1', 100, 50)
      .rtt('w1', 150, 9)
      .fault('revoke-lease', 'w1', 200, 215, { token: '5', sentAt: 201, ackAt: 211 })
      .lost('w1', 5, 330, { deadlineAt: 1500, detail: 'deleted' });
    expect(check(slow)).toEqual([]);
    // The runner's proxy and the holder both relay the news: each may be late by a resolution
    // (40 ms) without a lag line, so 80 ms after the round trip is still on time, 81 ms is not.
    const relayed = (lostAt: number) =>
      new HistoryBuilder()
        .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
        .rtt('w1', 150, 9)
        .fault('revoke-lease', 'w1', 200, 215, { token: '5', sentAt: 201, ackAt: 211 })
        .lost('w1', 5, lostAt, { deadlineAt: 1500, detail: 'deleted' });
    expect(check(relayed(211 + 9 + 80))).toEqual([]);
    expect(check(relayed(211 + 9 + 81))).toMatchObject([{ kind: 'late-deletion-signal' }]);
    // The holder's own measured lag counts from when the runner could pass the news on (its
    // resolution included), not from the round trip: blocked until 330, it has until 370.
    const blocked = (lostAt: number) => relayed(lostAt).lag('w1', 330, 40);
    expect(check(blocked(370))).toEqual([]);
    expect(check(blocked(371))).toMatchObject([{ kind: 'late-deletion-signal' }]);
    // A signal that never came is as late as the history is long.
    const never = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
      .fault('revoke-lease', 'w1', 200, 215, { token: '5', sentAt: 201, ackAt: 211 })
      .check('w1', 5, 900, true, 1500);
    expect(check(never)).toMatchObject([{ kind: 'late-deletion-signal' }]);
  });

  it('holds any deletion of the key the observer saw to the holder’s round trip', () => {
    const key = '/faults/lock/L/abc';
    const late = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 3000, key })
      .rtt('w1', 100, 10)
      .serverDelete(key, 500, 9)
      .check('w1', 5, 800, true, 3000)
      .release('w1', 'L', 900);
    expect(check(late)).toMatchObject([{ kind: 'believed-after-deletion', token: '5' }]);
    const onTime = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 3000, key })
      .rtt('w1', 100, 10)
      .serverDelete(key, 500, 9)
      .lost('w1', 5, 520, { deadlineAt: 3000, detail: 'deleted' });
    expect(check(onTime)).toEqual([]);
    // Its own release's deletion, and an earlier hold's (below its token: heard late by a watch
    // that fell behind), say nothing.
    const own = new HistoryBuilder()
      .acquire('w1', 'L', 5, 100, { deadlineMs: 3000, key })
      .serverDelete(key, 300, 4)
      .release('w1', 'L', 900)
      .serverDelete(key, 905, 12);
    expect(check(own)).toEqual([]);
  });
});
