/**
 * Fault smoke runs on the network and the cluster: a holder cut off from etcd (the fault proxy
 * stalls its connections) past its TTL, and the etcd leader of a 3-member cluster frozen. Each
 * run's history is checked offline against S1–S5 and the liveness bounds; the failure message
 * carries the seed that replays the run (FAULTS_SEED).
 */
import { describe, expect, it } from 'vitest';
import { runFaults } from './runner.js';

const RUN_MS = 180_000;

describe('fault smoke: network and cluster', () => {
  it(
    'a holder partitioned from etcd past its TTL loses the lock by its own deadline, and the lock passes on',
    async () => {
      const run = await runFaults({
        label: 'smoke-partition',
        workers: { lock: 3 },
        faults: ['partition', 'partition'],
      });
      expect(run.unexcused, run.describe()).toEqual([]);
      expect(run.injected.partition, run.describe()).toBe(2);
      const recoveries = run.result.samples.filter((s) => s.fault === 'partition');
      expect(recoveries.length, run.describe()).toBe(2);
      expect(
        recoveries.every((s) => s.status === 'ok'),
        run.describe(),
      ).toBe(true);
    },
    RUN_MS,
  );

  it(
    'the etcd leader of three members frozen: locks and elections carry on after the election',
    async () => {
      const run = await runFaults({
        label: 'smoke-pause-leader',
        members: 3,
        workers: { lock: 2, election: 2 },
        faults: ['pause-leader', 'pause-member'],
        // etcd's own minimum with a leader change in play: a 2 s lease would expire in the election.
        ttlSeconds: 4,
      });
      expect(run.unexcused, run.describe()).toEqual([]);
      expect(run.injected, run.describe()).toEqual({ 'pause-leader': 1, 'pause-member': 1 });
      // Both workloads (locks, the election) recover after each fault.
      const recoveries = run.result.samples.filter((s) => s.measure === 'recovery');
      expect(
        recoveries.map((s) => `${s.fault} ${s.workload}: ${s.status}`).sort(),
        run.describe(),
      ).toEqual([
        'pause-leader election: ok',
        'pause-leader lock: ok',
        'pause-member election: ok',
        'pause-member lock: ok',
      ]);
    },
    RUN_MS,
  );
});
