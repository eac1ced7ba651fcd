import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder } from './fixtures.js';
import { checkCauses } from './s8-cause.js';

const check = (b: HistoryBuilder) => checkCauses(createContext(b.lines, b.logsFromAcks(), CONFIG));

describe('S8: no hold or waiter loses its key without a cause', () => {
  it('flags a hold whose key vanished with no fault and before its deadline', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .lost('w1', 5, 700, { deadlineAt: 2000, detail: 'deleted' });
    expect(check(b)).toMatchObject([{ rule: 'S8', process: 'w1', token: '5' }]);
    const overwritten = new HistoryBuilder()
      .acquire('w1', 'E', 5, 0, { deadlineMs: 2000, workload: 'election' })
      .lost('w1', 5, 700, { deadlineAt: 2000, detail: 'overwritten' });
    expect(check(overwritten)[0]?.message).toContain('lost as "overwritten"');
  });

  it('flags a waiter whose queue key vanished', () => {
    const b = new HistoryBuilder().waiting('w2', 'L', 100);
    b.line('w2', 900, {
      type: 'fail',
      op: 'acquire',
      id: 'op1',
      workload: 'lock',
      name: 'L',
      reason: 'error:LOCK_LOST',
      detail: 'expired-in-queue',
    });
    expect(check(b)).toMatchObject([{ rule: 'S8', process: 'w2' }]);
  });

  it('accepts losses a deletion fault, a restore or the deadline explains, and session losses', () => {
    const deleted = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .fault('delete-key', 'w1', 600, 650, { token: '5' })
      .lost('w1', 5, 640, { deadlineAt: 2000, detail: 'deleted' });
    expect(check(deleted)).toEqual([]);
    const elsewhere = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .fault('delete-key', 'w2', 600, 650, { token: '9' })
      .lost('w1', 5, 640, { deadlineAt: 2000, detail: 'deleted' });
    expect(check(elsewhere)).toHaveLength(1);
    const expired = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 1000 })
      .lost('w1', 5, 1400, { deadlineAt: 1000, detail: 'deleted' });
    expect(check(expired)).toEqual([]);
    const session = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .lost('w1', 5, 700, { deadlineAt: 2000, detail: 'session' });
    expect(check(session)).toEqual([]);
    // A revoked lease stays gone: the next acquire on that session fails "gone", explained.
    const revoked = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0, { deadlineMs: 2000 })
      .fault('revoke-lease', 'w1', 600, 650, { token: '5' })
      .release('w1', 'L', 610)
      .waiting('w1', 'L', 700);
    revoked.line('w1', 900, {
      type: 'fail',
      op: 'acquire',
      id: 'op4',
      workload: 'lock',
      name: 'L',
      reason: 'error:LEASE_LOST',
      detail: 'gone',
    });
    expect(check(revoked)).toEqual([]);
    // …but not a later key that vanished for no reason.
    const later = new HistoryBuilder()
      .fault('revoke-lease', 'w1', 100, 150, { token: '4' })
      .acquire('w1', 'L', 5, 1000, { deadlineMs: 2000 })
      .lost('w1', 5, 1400, { deadlineAt: 3000, detail: 'deleted' });
    expect(check(later)).toHaveLength(1);
  });
});
