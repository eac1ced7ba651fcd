/**
 * Every wait honours its signal: an aborted tryAcquire settles with the abort reason promptly,
 * even while the withdraw of its own key cannot get through (the rest of the clean-up continues
 * in the background).
 */
import { connect, isLockTakenError } from '@leasehold/core';
import { TcpFaultProxy } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { onCleanup, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { monitorLoopLag } from '../setup/lag.js';

const endpoints = sharedEndpoints();
const LAG_SAMPLE_MS = 10;

describe('tryAcquire honours its signal while a call is in flight', () => {
  it('settles with the abort reason at the abort, even while its withdraw cannot get through', async () => {
    const callTimeoutMs = 3_000;
    using lag = monitorLoopLag(LAG_SAMPLE_MS);
    const lockPrefix = uniquePrefix('try-abort');
    await using holderClient = await connect({ endpoints, lockPrefix });
    const holder = await holderClient.acquire('job');
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    await using client = await connect({
      endpoints: [proxy.url],
      lockPrefix,
      callTimeoutMs,
    });
    onCleanup(client, () => {});
    const session = await client.session({ ttlSeconds: 60 });
    const warm = await client.acquire('warm', { session }); // the watch is open before the fault
    await warm.release();

    // 1 s each way: the join txn answers after ~2 s; its withdraw is sent right after.
    proxy.setMode('delay', { delayMs: 1_000 });
    const controller = new AbortController();
    const reason = new Error('caller gave up');
    const started = performance.now();
    const outcome = client.tryAcquire('job', { session, signal: controller.signal }).then(
      () => ({ what: 'lock' as const, at: performance.now() }),
      (error: unknown) => ({ what: error, at: performance.now() }),
    );
    // At 2.5 s the join has answered and the withdraw is on its way: the network stalls and the
    // caller gives up.
    const abortAt = await new Promise<number>((resolve) =>
      setTimeout(() => {
        proxy.setMode('stall');
        controller.abort(reason);
        resolve(performance.now());
      }, 2_500),
    );
    const settled = await waitFor(() => outcome, { timeoutMs: 30_000, what: 'tryAcquire settles' });
    const lateMs = settled.at - abortAt;
    console.log(
      `[try-abort] aborted ${(abortAt - started).toFixed(0)} ms in; settled ${lateMs.toFixed(0)} ms after the abort with ${
        settled.what === 'lock' ? 'a lock' : (settled.what as Error).name
      } (LockTakenError: ${isLockTakenError(settled.what)})`,
    );
    proxy.setMode('pass');
    // It settles at the abort: nothing it still waits for is remote (the stalled withdraw would
    // hold it up to its call deadline), so only this loop's lag, measured at the sampler's
    // interval, stands between the two.
    expect(lateMs).toBeLessThan(lag.maxLagMs + LAG_SAMPLE_MS);
    expect(settled.what).toBe(reason);
    await holder.release();
  }, 60_000);
});
