/**
 * Fault smoke runs aimed at a lock holder: frozen past its TTL (the seed scenario), killed, and
 * its lease revoked from outside. Each run's history is checked offline against S1–S8 and the
 * liveness bounds; the failure message carries the seed that replays the run (FAULTS_SEED).
 */
import { describe, expect, it } from 'vitest';
import { runFaults } from './runner.js';

const RUN_MS = 150_000;

describe('fault smoke: the lock holder', () => {
  it(
    'the seed scenario: a holder frozen (SIGSTOP) past its TTL has its late writes refused',
    async () => {
      const run = await runFaults({
        label: 'smoke-pause-holder',
        workers: { lock: 3 },
        faults: ['pause-holder', 'pause-holder'],
      });
      expect(run.violations, run.describe()).toEqual([]);
      expect(run.injected['pause-holder'], run.describe()).toBe(2);
      // The frozen holder woke up and wrote: the resources refused it.
      expect(run.result.report.zombies.rejected, run.describe()).toBeGreaterThan(0);
      const takeovers = run.result.samples.filter((s) => s.measure === 'takeover');
      expect(takeovers.length, run.describe()).toBe(2);
      expect(
        takeovers.every((s) => s.status === 'ok'),
        run.describe(),
      ).toBe(true);
    },
    RUN_MS,
  );

  it(
    'a killed holder’s lock passes on within TTL + 1 s',
    async () => {
      const run = await runFaults({
        label: 'smoke-kill-holder',
        workers: { lock: 3 },
        faults: ['kill-holder', 'kill-mid-acquire'],
      });
      expect(run.violations, run.describe()).toEqual([]);
      expect(run.injected['kill-holder'], run.describe()).toBe(1);
      const takeover = run.result.samples.find((s) => s.fault === 'kill-holder');
      expect(takeover?.status, run.describe()).toBe('ok');
    },
    RUN_MS,
  );

  it(
    'a holder whose lease is revoked or key deleted from outside stops, and the lock moves on',
    async () => {
      const run = await runFaults({
        label: 'smoke-revoke',
        workers: { lock: 3 },
        faults: ['revoke-lease', 'delete-key'],
      });
      expect(run.violations, run.describe()).toEqual([]);
      expect(run.injected, run.describe()).toEqual({ 'revoke-lease': 1, 'delete-key': 1 });
      const recoveries = run.result.samples.filter((s) => s.measure === 'recovery');
      expect(
        recoveries.map((s) => s.status),
        run.describe(),
      ).toEqual(['ok', 'ok']);
    },
    RUN_MS,
  );
});
