/**
 * A join txn that timed out on a slow path may still be applied later (etcd restarts a delayed
 * request's timeout when it arrives), after the lock was taken through another path and
 * released: it re-creates the key on the session's live lease, with nobody behind it. The client
 * removes such a key as soon as it sees it created (its watch event) and at the latest at its
 * next check, so the lock is never wedged by it.
 */
import { connect } from '@leasehold/core';
import { TcpFaultProxy } from '@leasehold/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, onCleanup, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

describe('a late duplicate of the join txn', () => {
  it('a key it re-creates after the release is removed once the client sees it; the lock is not wedged', async () => {
    const lockPrefix = uniquePrefix('late-join');
    await using b = await connect({ endpoints, lockPrefix });
    const recheckIntervalMs = 2_000;
    let lateKeys = 0;
    for (let trial = 1; trial <= 20 && lateKeys === 0; trial++) {
      const name = `job${trial}`;
      const keys = () => admin.getAll().prefix(`${lockPrefix}${name}/`).keys();
      await using slow = await TcpFaultProxy.start({ target: endpoints[0]! });
      await using a = await connect({
        endpoints: [slow.url, endpoints[0]!],
        lockPrefix,
        callTimeoutMs: 500,
        recheckIntervalMs,
        session: { ttlSeconds: 20 },
      });
      onCleanup(a, () => {});
      await a.sharedSession();
      // Until A has a connection through the proxy (etcd3 picks an endpoint per call).
      for (let i = 0; slow.connectionCount === 0 && i < 50; i++) {
        await (await a.acquire(`warm${trial}`)).release();
      }
      slow.setMode('delay', { delayMs: 3_000 }); // the path through the proxy turns slow
      // Every attempt may time out on the slow path: then the acquire fails (and its withdraw
      // runs), which leaves the same question.
      const lock = await a.acquire(name, { timeoutMs: 10_000 }).catch((e: unknown) => e as Error);
      if (!(lock instanceof Error)) await lock.release();
      await waitFor(async () => (await keys()).length === 0, { what: `${name} released` });
      // A duplicate sent on the slow path arrives within its 3 s delay, if there is one.
      const late = await waitFor(async () => ((await keys()).length > 0 ? true : undefined), {
        timeoutMs: 4_000,
        what: 'a late duplicate of the join',
      }).catch(() => false);
      if (!late) continue;
      lateKeys++;
      // Removed when its watch event reaches the client (which may come the slow way too) and
      // at the latest at the client's next check of the prefix.
      await waitFor(async () => (await keys()).length === 0, {
        timeoutMs: recheckIntervalMs + 3_000 + 2_000,
        what: 'the late key removed by the client',
      });
      const lockB = await b.tryAcquire(name);
      await lockB.release();
    }
    expect(lateKeys, 'precondition: a join landed after the release').toBeGreaterThan(0);
  }, 300_000);
});
