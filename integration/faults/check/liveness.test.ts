import { describe, expect, it } from 'vitest';
import { createContext } from './context.js';
import { CONFIG, HistoryBuilder } from './fixtures.js';
import { checkLiveness, plansFor } from './liveness.js';

const run = (b: HistoryBuilder, config = CONFIG) =>
  checkLiveness(createContext(b.lines, {}, config));

/** w1 holds L from 0; w2 waits for it from 100. */
function holderAndWaiter(): HistoryBuilder {
  return new HistoryBuilder()
    .acquire('w1', 'L', 5, 0, { deadlineMs: 1500 })
    .waiting('w2', 'L', 100);
}

describe('liveness: progress resumes within the bound', () => {
  it('measures a takeover from the holder pause (TTL + 1 s)', () => {
    const b = holderAndWaiter().fault('pause-holder', 'w1', 200, 5000);
    // w2's acquire (invoked at 100, waiting) is granted at 2500.
    b.granted('w2', 9, 2500);
    b.line('w2', 6000, { type: 'info', op: 'deadline', token: '9', deadlineAt: 0 });
    const { samples, violations } = run(b);
    expect(violations).toEqual([]);
    expect(samples).toMatchObject([
      { measure: 'takeover', latencyMs: 2300, boundMs: 3000, status: 'ok' },
    ]);
  });

  it('flags a takeover later than TTL + 1 s', () => {
    const b = holderAndWaiter().fault('kill-holder', 'w1', 200, 210);
    b.granted('w2', 9, 3300);
    const { violations, samples } = run(b);
    expect(samples[0]).toMatchObject({ status: 'late', latencyMs: 3100 });
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatchObject({ rule: 'liveness' });
    expect(violations[0]?.message).toContain('takeover');
    expect(violations[0]?.message).toContain('bound 3.0 s');
  });

  it('waits for a long hold of someone else before a killed waiter’s takeover is due', () => {
    // w1 holds until 6000; w2, waiting behind it, is killed at 200; w3 is granted at 6500.
    const b = holderAndWaiter().waiting('w3', 'L', 150).fault('kill-mid-acquire', 'w2', 200, 210);
    b.release('w1', 'L', 6000);
    b.granted('w3', 9, 6500);
    expect(run(b).samples[0]).toMatchObject({ status: 'ok', boundMs: 5800 + 1000 });
    const late = holderAndWaiter()
      .waiting('w3', 'L', 150)
      .fault('kill-mid-acquire', 'w2', 200, 210);
    late.release('w1', 'L', 6000);
    late.granted('w3', 9, 7100);
    expect(run(late).samples[0]).toMatchObject({ status: 'late' });
  });

  it('flags a takeover that never comes while the history goes on', () => {
    const b = holderAndWaiter().fault('kill-holder', 'w1', 200, 210);
    b.write('w3', { name: 'other', token: 11, at: 6000 });
    expect(run(b).samples[0]?.status).toBe('missing');
    expect(run(b).violations).toHaveLength(1);
  });

  it('does not judge what the history did not see or nobody asked for', () => {
    const shortRun = holderAndWaiter().fault('kill-holder', 'w1', 200, 210);
    shortRun.write('w3', { name: 'other', token: 11, at: 1000 });
    expect(run(shortRun)).toMatchObject({ violations: [], samples: [{ status: 'unobserved' }] });
    const idle = new HistoryBuilder().acquire('w1', 'L', 5, 0).fault('kill-holder', 'w1', 200, 210);
    idle.write('w3', { name: 'other', token: 11, at: 9000 });
    expect(run(idle)).toMatchObject({ violations: [], samples: [{ status: 'no-demand' }] });
  });

  it('measures recovery after a partition heals (1 s) and flags a late one', () => {
    const ok = new HistoryBuilder().acquire('w1', 'L', 5, 0).fault('partition', 'w1', 100, 2000);
    ok.write('w1', { token: 5, at: 1500, takesMs: 900 });
    expect(run(ok)).toMatchObject({
      violations: [],
      samples: [{ measure: 'recovery', latencyMs: 400 }],
    });

    const late = new HistoryBuilder().acquire('w1', 'L', 5, 0).fault('partition', 'w1', 100, 2000);
    late.write('w1', { token: 5, at: 1500, takesMs: 2000 });
    const result = run(late);
    expect(result.samples[0]).toMatchObject({ status: 'late', latencyMs: 1500, boundMs: 1000 });
    expect(result.violations[0]?.message).toContain('recovery');
  });

  it('judges each workload apart: locks moving on do not vouch for a stuck election', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0)
      .acquire('w3', 'E', 7, 0, { workload: 'election' })
      .fault('kill-leader', '', 100, 200);
    b.write('w1', { token: 5, at: 300 }); // the lock workload recovers at once
    b.write('w3', { token: 7, at: 300, workload: 'election', takesMs: 5000 }); // the leader's does not
    b.write('w1', { token: 5, at: 6000 }); // the history runs on past the bound
    const { violations, samples } = run(b);
    expect(samples).toMatchObject([
      { workload: 'election', status: 'late' },
      { workload: 'lock', status: 'ok' },
    ]);
    expect(violations).toHaveLength(1);
    expect(violations[0]?.message).toContain('election workload');
  });

  it('holds leader faults to the election timeout + 1 s from the config', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0)
      .fault('pause-leader', 'etcd-2', 100, 2000);
    b.write('w1', { token: 5, at: 1500, takesMs: 3000 }); // 2.5 s after the fault's end
    expect(run(b).samples[0]).toMatchObject({ boundMs: 2000, status: 'late' });
    expect(run(b, { ...CONFIG, electionTimeoutMs: 2000 }).samples[0]).toMatchObject({
      boundMs: 3000,
      status: 'ok',
    });
  });

  it('checks both a writable cluster and a free lock after a restart', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0)
      .fault('restart-cluster', 'cluster', 100, 1000)
      .waiting('w2', 'L', 900);
    b.write('w1', { token: 5, at: 1100 });
    b.release('w1', 'L', 1200); // the lock is free from here on, yet nobody gets it in time
    b.granted('w2', 9, 6000);
    const { samples, violations } = run(b);
    expect(samples.map((s) => [s.measure, s.status])).toEqual([
      ['recovery', 'ok'],
      ['lock-free', 'late'],
    ]);
    expect(violations).toHaveLength(1);
  });

  it('a lock held through a restart by a live holder is not wedged: the bound waits for that hold', () => {
    const b = new HistoryBuilder()
      .acquire('w1', 'L', 5, 0)
      .fault('restart-cluster', 'cluster', 100, 1000)
      .waiting('w2', 'L', 900);
    b.write('w1', { token: 5, at: 1100 });
    b.release('w1', 'L', 9000); // a long hold, on a session that survived the restart
    b.granted('w2', 9, 9100);
    const { samples, violations } = run(b);
    expect(samples.find((s) => s.measure === 'lock-free')).toMatchObject({ status: 'ok' });
    expect(violations).toEqual([]);
  });

  it('takes bounds from the config, and treats a short freeze as a recovery', () => {
    const window = {
      id: 'f',
      fault: 'pause-holder',
      target: 'w1',
      start: 0,
      end: 500,
      detail: { at: 0, process: 'nemesis', type: 'fault-start' as const },
    };
    expect(plansFor(window, CONFIG)).toEqual([{ measure: 'recovery', from: 'end', boundMs: 1000 }]);
    expect(plansFor({ ...window, end: 5000 }, { ...CONFIG, ttlSeconds: 5 })).toEqual([
      { measure: 'takeover', from: 'start', boundMs: 6000 },
    ]);
    expect(
      plansFor({ ...window, fault: 'delay' }, { ...CONFIG, boundsMs: { delay: 4000 } })[0]?.boundMs,
    ).toBe(4000);
    // Measured quantities, not constants: a slow link's bound grows with its delay, a quorum
    // loss's with the TTL and the election timeout.
    const slow = { ...window, fault: 'slow-links', detail: { ...window.detail, delayMs: 2500 } };
    expect(plansFor(slow, CONFIG)[0]?.boundMs).toBe(2500 + 1000 + 1000);
    expect(plansFor({ ...window, fault: 'quorum-loss' }, CONFIG)[0]?.boundMs).toBe(
      2000 + 3000 + 1000 + 1000,
    );
  });
});
