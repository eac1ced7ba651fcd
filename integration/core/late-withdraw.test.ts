/**
 * The withdraw that follows an aborted join is guarded by the create revision the join's answer
 * named, never by the lease: a late duplicate of it (a retry that timed out on a slow path and
 * landed later) must not delete the same session's next hold of that lock, which has the same key
 * name and lease.
 */
import { connect, isEtcdUnavailableError, isLockLostError } from '@leasehold/core';
import { TcpFaultProxy } from '@leasehold/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, onCleanup, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const CALL_TIMEOUT_MS = 500;
/** The slow path's delay: every attempt sent on it times out (three deadlines) long before it lands. */
const SLOW_PATH_DELAY_MS = 3 * CALL_TIMEOUT_MS;
/** Trials whose precondition held (an aborted join whose withdraw hit the slow path) to check. */
const CHECKED_TRIALS = 5;
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

describe("a late duplicate of an aborted join's withdraw", () => {
  it('never deletes the key of a later hold of the same lock on the same session', async () => {
    const lockPrefix = uniquePrefix('stale-withdraw');
    const lostHolds: string[] = [];
    let checked = 0;
    for (
      let trial = 1;
      trial <= 30 && checked < CHECKED_TRIALS && lostHolds.length === 0;
      trial++
    ) {
      const name = `job${trial}`;
      await using slow = await TcpFaultProxy.start({ target: endpoints[0]! });
      await using a = await connect({
        endpoints: [slow.url, endpoints[0]!],
        lockPrefix,
        callTimeoutMs: CALL_TIMEOUT_MS,
        session: { ttlSeconds: 20 },
      });
      const reported: string[] = [];
      onCleanup(a, (e) => reported.push(e.message));
      await a.sharedSession();
      for (let i = 0; slow.connectionCount === 0 && i < 50; i++) {
        await (await a.acquire(`warm${trial}`)).release();
      }
      slow.setMode('delay', { delayMs: SLOW_PATH_DELAY_MS });
      // Abort the acquire while its join txn is in flight (a txn takes ~1-3 ms on loopback).
      const aborted = await a.acquire(name, { signal: AbortSignal.timeout(1 + (trial % 3)) }).then(
        async (lock) => {
          await lock.release();
          return false;
        },
        () => true,
      );
      // Whatever the aborted join created is withdrawn (through whichever path answers first).
      await waitFor(
        async () => (await admin.getAll().prefix(`${lockPrefix}${name}/`).keys()).length === 0,
        { timeoutMs: 10_000, what: 'withdrawn' },
      );
      // The withdraw's first attempt timed out on the slow path (and is still on its way).
      const withdrawRetried = reported.some((m) => m.includes('withdraw'));
      if (!aborted || !withdrawRetried) {
        console.log(
          `[stale-withdraw] trial ${trial}: aborted in flight: ${aborted}; first withdraw attempt on the slow path: ${withdrawRetried}`,
        );
        continue;
      }
      // The same session, again. Every attempt may take the slow path and time out: then there
      // is no later hold to protect in this trial.
      const lock = await a.acquire(name, { timeoutMs: 10_000 }).catch((e: unknown) => {
        if (isEtcdUnavailableError(e)) return undefined;
        throw e;
      });
      if (!lock) continue;
      checked++;
      const heldAt = performance.now();
      // Anything sent on the slow path lands SLOW_PATH_DELAY_MS after it was sent; the stale
      // withdraw was sent before this hold existed, so waiting that long (and one more call
      // deadline, for the proxy's and etcd's own handling) covers its arrival.
      const deleted = await waitFor(
        async () => (await admin.get(lock.key).exec()).kvs.length === 0,
        { timeoutMs: SLOW_PATH_DELAY_MS + 2 * CALL_TIMEOUT_MS, intervalMs: 20 },
      ).then(
        () => Math.round(performance.now() - heldAt),
        () => false,
      );
      if (deleted === false) {
        console.log(`[stale-withdraw] trial ${trial}: new hold token ${lock.token} kept its key`);
        await lock.release();
        continue;
      }
      // Its own watch (or the periodic check) tells the hold its key is gone.
      await waitFor(() => !lock.isHeld, { timeoutMs: 10_000 }).catch(() => {});
      const reason = lock.signal.reason as Error | undefined;
      console.log(
        `[stale-withdraw] trial ${trial}: the first withdraw attempt had timed out on the slow path; the new hold (token ${lock.token}, key ${lock.key}) had its key deleted ${deleted} ms after it was acquired; it ended with ${reason?.name} ${isLockLostError(reason) ? reason.reason : ''}`,
      );
      lostHolds.push(`${lock.key} token ${lock.token}: ${reason?.message}`);
    }
    expect(lostHolds, 'holds lost to a stale withdraw of their own session').toEqual([]);
    // A run that never met its precondition proved nothing.
    expect(checked, 'trials that reached a later hold after a slow-path withdraw').toBeGreaterThan(
      0,
    );
  }, 300_000);
});
