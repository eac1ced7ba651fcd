/**
 * The full fault suite (`pnpm faults`): every fault kind at least once on a 3-member cluster,
 * two minutes of random faults over locks, an election and cron together, and the negative
 * control (fencing off for locks and the election alike). Each run writes history.jsonl,
 * logs.json, report.json and timeline.html (and .png) under integration/.scratch/faults/<run-id>/
 * and prints its one-line summary with the seed; a run is replayed with FAULTS_SEED=<seed>. See
 * README.md for the properties and the fault kinds.
 */
import { describe, expect, it } from 'vitest';
import { FAULT_KINDS } from './nemesis.js';
import { runFaults } from './runner.js';

const MINUTES = 60_000;
/** etcd's own minimum with leader changes in play: a 2 s lease would expire in an election. */
const TTL_SECONDS = 4;

describe('fault suite', () => {
  it(
    'every fault kind, one after the other, on three members: no violation',
    async () => {
      const run = await runFaults({
        label: 'full-each-kind',
        members: 3,
        ttlSeconds: TTL_SECONDS,
        workers: { lock: 3, election: 2, cron: 2 },
        faults: [...FAULT_KINDS],
        screenshot: true,
      });
      expect(run.violations, run.describe()).toEqual([]);
      const missed = FAULT_KINDS.filter((kind) => !run.injected[kind]);
      expect(missed, run.describe()).toEqual([]);
    },
    20 * MINUTES,
  );

  it(
    'two minutes of random faults over locks, an election and cron together: no violation',
    async () => {
      const run = await runFaults({
        label: 'full-combined',
        members: 3,
        ttlSeconds: TTL_SECONDS,
        workers: { lock: 3, election: 2, cron: 2 },
        mode: 'random',
        durationMs: 2 * MINUTES,
        faults: [...FAULT_KINDS],
        screenshot: true,
      });
      expect(run.violations, run.describe()).toEqual([]);
    },
    20 * MINUTES,
  );

  it(
    'negative control: without fencing the checker finds the frozen holders’ writes',
    async () => {
      const run = await runFaults({
        label: 'full-negative-control',
        fenced: false,
        workers: { lock: 3, election: 2 },
        faults: ['pause-holder', 'stall-loop', 'partition', 'pause-holder'],
      });
      const safety = run.violations.filter((v) => ['S1', 'S2', 'S4'].includes(v.rule));
      expect(safety.length, run.describe()).toBeGreaterThan(0);
    },
    5 * MINUTES,
  );
});
