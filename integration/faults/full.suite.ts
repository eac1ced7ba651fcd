/**
 * The full fault suite (`pnpm faults`): every fault kind once on a 3-member cluster, a 2-minute
 * random nemesis over locks, an election and cron together, and the negative control. Each run
 * writes history.jsonl, logs.json, report.json and timeline.html under
 * integration/.scratch/faults/<run-id>/ and prints its one-line summary with the seed; a run is
 * replayed with FAULTS_SEED=<seed>.
 */
import { describe, expect, it } from 'vitest';
import { FAULT_KINDS } from './nemesis.js';
import { runFaults } from './runner.js';

const MINUTES = 60_000;

describe('fault suite', () => {
  it(
    'every fault kind, one after the other, on three members: no violation',
    async () => {
      const run = await runFaults({
        label: 'full-each-kind',
        members: 3,
        workers: { lock: 3, election: 2, cron: 2 },
        faults: [...FAULT_KINDS],
        screenshot: true,
      });
      expect(run.violations, run.describe()).toEqual([]);
      const missed = FAULT_KINDS.filter((kind) => !run.injected[kind]);
      expect(missed, run.describe()).toEqual([]);
    },
    8 * MINUTES,
  );

  it(
    'two minutes of random faults over locks, an election and cron together: no violation',
    async () => {
      const run = await runFaults({
        label: 'full-combined',
        members: 3,
        workers: { lock: 3, election: 2, cron: 2 },
        mode: 'random',
        durationMs: 2 * MINUTES,
        faults: [...FAULT_KINDS],
        screenshot: true,
      });
      expect(run.violations, run.describe()).toEqual([]);
    },
    8 * MINUTES,
  );

  it(
    'negative control: without fencing the checker finds the frozen holder’s writes',
    async () => {
      const run = await runFaults({
        label: 'full-negative-control',
        workers: { unfenced: 3 },
        faults: ['pause-holder', 'stall-loop', 'partition'],
      });
      const safety = run.result.violations.filter((v) => v.rule === 'S1' || v.rule === 'S2');
      expect(safety.length, run.describe()).toBeGreaterThan(0);
    },
    3 * MINUTES,
  );
});
