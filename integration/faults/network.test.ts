/**
 * Fault smoke runs on the network and the cluster: a holder cut off from etcd (the fault proxy
 * stalls its connections) past its deadline, and the etcd leader of a 3-member cluster frozen,
 * then cut off from its followers while clients still reach it. Each run's history is checked
 * offline against S1–S8, coverage and the liveness bounds (see README.md); the failure message
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
      expect(run.violations, run.describe()).toEqual([]);
      expect(run.injected.partition, run.describe()).toBe(2);
      // Each partition cut off a holder that was still holding when its deadline passed: the
      // loss the run is named after was signalled, during the partition, by the target itself.
      const windows = run.result.report.faults.windows.filter((f) => f.fault === 'partition');
      const lost = windows.map((f) =>
        run.history.some(
          (l) =>
            l.op === 'lost' &&
            l.process === f.target &&
            l.at >= f.start &&
            l.at <= (f.end ?? Infinity),
        ),
      );
      expect(lost, run.describe()).toEqual([true, true]);
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
    'the etcd leader of three members frozen, then cut off from its followers: locks and elections carry on',
    async () => {
      const run = await runFaults({
        label: 'smoke-pause-leader',
        members: 3,
        workers: { lock: 2, election: 2 },
        faults: ['pause-leader', 'pause-member', 'partition-leader'],
        // etcd's own minimum with a leader change in play: a 2 s lease would expire in the election.
        ttlSeconds: 4,
      });
      expect(run.violations, run.describe()).toEqual([]);
      expect(run.injected, run.describe()).toEqual({
        'pause-leader': 1,
        'pause-member': 1,
        'partition-leader': 1,
      });
      // The cut took: by its end the other two members had elected a leader of their own.
      const cut = run.result.report.faults.windows.find((f) => f.fault === 'partition-leader')!;
      expect(cut.detail.leader, run.describe()).toMatch(/^m\d/);
      expect(cut.detail.leader, run.describe()).not.toBe(cut.target);
      // Both workloads (locks, the election) recover after each fault.
      const recoveries = run.result.samples.filter((s) => s.measure === 'recovery');
      expect(
        recoveries.map((s) => `${s.fault} ${s.workload}: ${s.status}`).sort(),
        run.describe(),
      ).toEqual([
        'partition-leader election: ok',
        'partition-leader lock: ok',
        'pause-leader election: ok',
        'pause-leader lock: ok',
        'pause-member election: ok',
        'pause-member lock: ok',
      ]);
    },
    RUN_MS,
  );
});
