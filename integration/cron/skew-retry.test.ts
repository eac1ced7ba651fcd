/**
 * Clock skew and the client's own retries (issue 19, hole 5): a claim planned in time whose
 * attempts time out must not be re-sent once the record of the fire may have expired, or the
 * fire runs twice. In one process against the run's etcd, with a wrapped wall clock (`now`) and
 * a fault proxy between the late replica and etcd.
 */
import { connect } from '@leasehold/core';
import { createScheduler } from '@leasehold/cron';
import { TcpFaultProxy } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../setup/etcd.js';
import { inProcess } from './in-process.js';
import { once, skewedReplica, until } from './skew-clock.js';

const cron = inProcess();
const { admin } = cron;

describe('@leasehold/cron under clock skew, with a claim whose attempts time out', () => {
  it('a claim sent in time whose attempts time out is not re-sent once its record may have expired: a replica cut off from etcd and healed after the record of the replica ahead is gone does not run the fire again', async () => {
    const prefix = cron.prefixFor('cron-skew-retry');
    const SKEW_MS = 10_000;
    const AHEAD_MS = 9_500;
    const WINDOW_MS = 49_000;
    // 49 s + 10 s < 60 s: accepted.
    const options = {
      misfire: 'run-once',
      catchUpWindowMs: WINDOW_MS,
      retentionSeconds: 60,
    } as const;
    const runs: string[] = [];
    const ahead = await skewedReplica(cron, prefix, 'ahead', AHEAD_MS, SKEW_MS);
    const fireMs = Math.ceil((Date.now() + AHEAD_MS + 3_000) / 1000) * 1000;
    const claimedAt = new Promise<number>((resolve) => ahead.onClaimed(() => resolve(Date.now())));
    ahead.schedule('job', once(fireMs), () => void runs.push('ahead'), options);
    const claimed = await claimedAt;
    await waitFor(() => runs.length === 1, { what: 'the run of the replica ahead' });
    await ahead.stop();

    // The replica behind, on the machine's clock, talks to etcd through a proxy; its client
    // retries a call whose answer is lost up to 10 times, and its lease outlives the cut.
    const proxy = await TcpFaultProxy.start({ target: cron.endpoints[0]! });
    try {
      const client = await connect({
        endpoints: [proxy.url],
        maxAttempts: 10,
        session: { ttlSeconds: 120 },
      });
      const late = await createScheduler(client, {
        prefix,
        runner: 'late',
        maxClockSkewMs: SKEW_MS,
      });
      const events: string[] = [];
      // What it decides about the fire (the warm-up job below is left out).
      late.onSkipped((e) => e.job === 'job' && events.push(`skipped ${e.reason}`));
      late.onError((e) => e.job === 'job' && events.push(`error ${e.error.name}`));
      late.onClaimed((e) => e.job === 'job' && events.push('claimed'));
      // Its retention lease is granted just before the cut (a warm-up fire of another job), so
      // the claim below goes out at once instead of waiting on a grant.
      await until(fireMs + WINDOW_MS - 3_000);
      const warmMs = Math.ceil((Date.now() + 500) / 1000) * 1000;
      const warmed = new Promise<void>((resolve) => late.onFinished(() => resolve()));
      late.schedule('warm', once(warmMs), () => {}, options);
      await waitFor(() => warmed.then(() => true), { what: 'the warm-up run ends' });
      // Cut off, then plans the catch-up claim within its window: less than 2 s are left
      // before the record of the replica ahead may expire, by its own reckoning.
      proxy.setMode('stall');
      const plannedAt = Date.now();
      late.schedule('job', once(fireMs), () => void runs.push('late'), options);
      expect(plannedAt - fireMs, 'ms after the fire the late replica planned').toBeLessThanOrEqual(
        WINDOW_MS,
      );
      const recordKey = `${prefix}job/fire/${new Date(fireMs).toISOString()}`;
      const goneAt = await waitFor(
        async () => ((await admin.get(recordKey).exists()) ? undefined : Date.now()),
        { timeoutMs: 30_000, intervalMs: 100, what: 'the record expires' },
      );
      expect(goneAt - claimed).toBeGreaterThanOrEqual(60_000);
      // Healed once the record is gone: whatever the replica sends now lands on no record.
      proxy.setMode('pass');
      await waitFor(() => events.length > 0, {
        timeoutMs: 30_000,
        what: 'the late replica decides',
      });
      // Whatever it decided, it must not have run the fire a second time (it has had time to).
      await waitFor(async () => (await late.history('job')).every((h) => h.outcome !== 'running'), {
        timeoutMs: 30_000,
        what: 'no run of the fire in progress',
      });
      await late.stop();
      await client.close();
      console.log(
        `[cron skew retry] record gone ${goneAt - claimed} ms after the claim, ${goneAt - plannedAt} ms after the late replica planned; it said ${events.join(', ')}`,
      );
      expect(runs).toEqual(['ahead']);
    } finally {
      await proxy.close();
    }
  }, 150_000);
});
