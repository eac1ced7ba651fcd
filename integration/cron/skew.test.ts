/**
 * Clock skew between replicas and how long a fire's record lives (issue 19, hole 5): a record
 * must exist as long as any replica whose clock lags by up to the stated `maxClockSkewMs` may
 * still claim the fire, or that replica claims it again and runs it twice. In one process
 * against the run's etcd, each scheduler with its own wrapped wall clock (`now`).
 */
import { createScheduler, isInvalidArgumentError, type SkippedEvent } from '@leasehold/cron';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../setup/etcd.js';
import { Proc, replicaEnv, replicaScript } from './harness.js';
import { inProcess } from './in-process.js';
import { once, skewedReplica, until } from './skew-clock.js';

const cron = inProcess();
const { admin } = cron;

/** A scheduler on this file's client whose clock runs `offsetMs` ahead. */
const replica = (prefix: string, runner: string, offsetMs: number, maxClockSkewMs?: number) =>
  skewedReplica(cron, prefix, runner, offsetMs, maxClockSkewMs);

describe('@leasehold/cron under clock skew', () => {
  it("refuses issue 19's configurations, which ran a fire twice with replicas 9 s apart, naming both numbers", async () => {
    const prefix = cron.prefixFor('cron-skew-refused');
    const s = await replica(prefix, 'a', 0);
    const refused: [string, object, RegExp][] = [
      [
        'catch-up window 59 s, retention 60 s',
        { misfire: 'run-once', catchUpWindowMs: 59_000, retentionSeconds: 60 },
        /^options\.retentionSeconds \(60 s = 60000 ms\) must be more than options\.catchUpWindowMs \(59000 ms\) \+ maxClockSkewMs \(10000 ms\) = 69000 ms/,
      ],
      [
        'late tolerance 59 s, retention 60 s',
        { lateToleranceMs: 59_000, retentionSeconds: 60 },
        /^options\.retentionSeconds \(60 s = 60000 ms\) must be more than options\.lateToleranceMs \(59000 ms\) \+ maxClockSkewMs \(10000 ms\)/,
      ],
    ];
    for (const [what, options, message] of refused) {
      let caught: unknown;
      try {
        s.schedule('job', '0 0 1 1 *', () => {}, options);
      } catch (err) {
        caught = err;
      }
      expect(isInvalidArgumentError(caught), `${what}: ${String(caught)}`).toBe(true);
      expect((caught as Error).message, what).toMatch(message);
    }
    await expect(createScheduler(cron.client, { maxClockSkewMs: -1 })).rejects.toSatisfy(
      isInvalidArgumentError,
    );
    expect(await admin.getAll().prefix(prefix).keys()).toEqual([]);
  });

  it('replicas 9 s apart, at the bound for a stated skew of 9.5 s: a replica reaching the fire late in its window finds its record, which outlives every window, and one that stalls before sending its claim does not send it', async () => {
    const prefix = cron.prefixFor('cron-skew-bound');
    const SKEW_MS = 9_500;
    const AHEAD_MS = 9_000;
    const WINDOW_MS = 47_500;
    const JITTER_MS = 2_000;
    // 47.5 s + 2 s of start jitter + 9.5 s < 60 s: accepted. The record of the fire lives at
    // least 60 s from its claim, made when the replica ahead reached the fire, 9 s before the
    // machine's clock did.
    const options = {
      misfire: 'run-once',
      catchUpWindowMs: WINDOW_MS,
      retentionSeconds: 60,
    } as const;
    const runs: string[] = [];
    // A replica in a process of its own, on the machine's clock, whose lease outlives a long stop.
    const stalled = await Proc.start(
      'stalled',
      replicaScript,
      replicaEnv(cron.endpoints, prefix, {
        TTL_SECONDS: '120',
        MAX_CLOCK_SKEW_MS: String(SKEW_MS),
      }),
    );
    const ahead = await replica(prefix, 'ahead', AHEAD_MS, SKEW_MS);
    // The fire, a few seconds from now by the clock of the replica ahead.
    const fireMs = Math.ceil((Date.now() + AHEAD_MS + 3_000) / 1000) * 1000;
    const claimedAt = new Promise<number>((resolve) => ahead.onClaimed(() => resolve(Date.now())));
    ahead.schedule('job', once(fireMs), () => void runs.push('ahead'), options);
    const claimed = await claimedAt;
    // It reached the fire by its own clock: 9 s before the machine's clock says it came.
    expect(claimed).toBeLessThan(fireMs);
    await waitFor(() => runs.length === 1, { what: 'the run of the replica ahead' });
    await ahead.stop();

    // A replica on the machine's clock, started late in its catch-up window (with 2 s left for
    // a late timer on a loaded host): it claims the fire as a catch-up, and finds the record.
    const recordKey = `${prefix}job/fire/${new Date(fireMs).toISOString()}`;
    await until(fireMs + WINDOW_MS - 2_000);
    const late = await replica(prefix, 'late', 0, SKEW_MS);
    const skipped = new Promise<SkippedEvent>((resolve) => late.onSkipped(resolve));
    const plannedAt = Date.now();
    late.schedule('job', once(fireMs), () => void runs.push('late'), options);
    // What the test needs: the late replica planned inside its window (the timer above may run
    // late on a loaded host; 2 s of margin).
    expect(plannedAt - fireMs, 'ms after the fire the late replica planned').toBeLessThanOrEqual(
      WINDOW_MS,
    );
    expect(await skipped).toMatchObject({
      reason: 'claimed-elsewhere',
      holder: { runner: 'ahead' },
    });
    // The replica in its own process plans its catch-up claim within its window too, and stops
    // (SIGSTOP) before its start jitter has passed: the claim is planned, not sent.
    const answer = await stalled.request('schedule', {
      job: 'job',
      schedule: once(fireMs),
      options: { ...options, startJitterMs: JITTER_MS },
      stopSelf: true,
    });
    expect((answer.after as number) - fireMs).toBeLessThanOrEqual(WINDOW_MS);

    // The record expires with its retention lease (60 s + a rotation period after its grant)…
    const goneAt = await waitFor(
      async () => ((await admin.get(recordKey).exists()) ? undefined : Date.now()),
      { timeoutMs: 40_000, intervalMs: 100, what: 'the record expires' },
    );
    // …at least 60 s after the claim, and so only once the clock of every replica within the
    // stated skew of the one ahead (the one most behind: 9.5 s behind it) has passed the end of
    // its window: none of them would claim the fire again.
    expect(goneAt - claimed).toBeGreaterThanOrEqual(60_000);
    const mostBehindMs = AHEAD_MS - SKEW_MS;
    expect(goneAt + mostBehindMs).toBeGreaterThan(fireMs + WINDOW_MS);
    // Resumed now, the stalled replica would send a claim planned in time for a fire whose
    // record is gone: it checks first, and skips the fire as missed instead of running it again.
    stalled.kill('SIGCONT');
    const decided = await stalled.event(
      (m) => m.event === 'claimed' || m.event === 'skipped',
      'the stalled replica decides about the fire',
    );
    // ('claimed-elsewhere' only if its jitter was so short that the claim left before the stop.)
    expect(decided).toMatchObject({ event: 'skipped' });
    expect(['misfire', 'claimed-elsewhere']).toContain(decided.reason);
    expect(await stalled.terminate()).toEqual({ code: 0, signal: null });
    await late.stop();
    expect(runs).toEqual(['ahead']);
    expect(await admin.get(recordKey).exists()).toBe(false);
    console.log(
      `[cron skew] claimed ${fireMs - claimed} ms before the fire by the machine's clock; record gone ${goneAt - claimed} ms after the claim; late replica planned ${plannedAt - fireMs} ms after the fire; the stalled one said ${String(decided.reason)}`,
    );
  }, 120_000);
});
