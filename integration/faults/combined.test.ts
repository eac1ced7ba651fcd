/**
 * A short combined fault run (locks, an election and cron together under a random mix of faults)
 * and the negative control: the same checker over a workload whose writes skip fencing must find
 * violations, or the checker proves nothing.
 */
import { describe, expect, it } from 'vitest';
import { runFaults } from './runner.js';

describe('fault smoke: combined', () => {
  it('locks, an election and cron under mixed faults (each kind at least once): no violation', async () => {
    const run = await runFaults({
      label: 'smoke-combined',
      workers: { lock: 2, election: 2, cron: 2 },
      mode: 'random',
      durationMs: 20_000,
      faults: [
        'pause-holder',
        'kill-holder',
        'partition',
        'flap',
        'delay',
        'compact',
        'stall-loop',
        'clock-skew',
      ],
      screenshot: true,
    });
    expect(run.violations, run.describe()).toEqual([]);
    // Every fire of the 1 s schedule was judged: a run with cron but no fires proves nothing.
    const fires = run.history.filter((l) => l.op === 'cron-run' && l.type === 'ok').length;
    expect(fires, run.describe()).toBeGreaterThan(5);
  }, 180_000);

  it('negative control: without fencing, a frozen holder’s late writes land and the checker says so', async () => {
    const run = await runFaults({
      label: 'negative-control',
      workers: { unfenced: 3 },
      faults: ['pause-holder', 'pause-holder'],
    });
    expect(run.injected['pause-holder'], run.describe()).toBeGreaterThan(0);
    const safety = run.result.violations.filter((v) => v.rule === 'S1' || v.rule === 'S2');
    expect(safety.length, run.describe()).toBeGreaterThan(0);
  }, 150_000);
});
