/**
 * A join txn that timed out on a slow path may still be applied later (etcd restarts a delayed
 * request's timeout when it arrives), after the lock was taken through another path and
 * released: it re-creates the key on the session's live lease, with nobody behind it. The client
 * removes such a key as soon as it sees it created (its watch event) and at the latest at its
 * next check, so the lock is never wedged by it.
 */
import { connect } from '@leasehold/core';
import { afterAll, describe, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

describe('a late duplicate of the join txn', () => {
  it('a key it re-creates after the release is removed once the client sees it; the lock is not wedged', async () => {
    // Whether a real duplicate lands late depends on how the member handles the cancelled
    // attempt (a cancel that arrives with the request usually stops it), so the late txn's
    // effect is written directly: the key, on the session's live lease, after the release.
    const lockPrefix = uniquePrefix('late-join');
    const recheckIntervalMs = 2_000;
    await using a = await connect({ endpoints, lockPrefix, recheckIntervalMs });
    await using b = await connect({ endpoints, lockPrefix });
    const session = await a.sharedSession();
    const name = 'job';
    const keys = () => admin.getAll().prefix(`${lockPrefix}${name}/`).keys();
    await (await a.acquire(name)).release();
    await waitFor(async () => (await keys()).length === 0, { what: `${name} released` });
    const key = `${lockPrefix}${name}/${session.leaseId.toString(16)}`;
    await admin.put(key).value('').lease(session.leaseId.toString()).exec();
    // Removed when its watch event reaches the client, at the latest at its next check.
    await waitFor(async () => (await keys()).length === 0, {
      timeoutMs: recheckIntervalMs + 3_000,
      what: 'the late key removed by the client',
    });
    const lockB = await b.tryAcquire(name);
    await lockB.release();
    // The session that owned the stray key is unharmed: it still takes and releases the lock.
    await (await a.acquire(name, { timeoutMs: 5_000 })).release();
  }, 60_000);
});
