/**
 * A same-settings snapshot restore brings back keys the old history had already removed, bound to
 * leases that are still kept alive. Such a key must not wedge the lock:
 * - a client with a live session but no lock still checks (its session's lease may own keys):
 *   its read of the prefix notices the rewound history, or its sweep removes the key;
 * - a client cut off during the restore, whose revision and raft term the restored history has
 *   already caught up with (the operator bumped the revision, as the README says; this cluster
 *   had no leader change, so the term is the same), cannot tell the histories apart: it goes on,
 *   consistently with the restored history (its hold whose key is in the snapshot stays held),
 *   and sweeps the key it had released.
 */
import { connect, isClusterChangedError, isLockTakenError } from '@leasehold/core';
import { startEtcd, TcpFaultProxy } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { etcdClient, onCleanup, uniquePrefix, waitFor } from '../setup/etcd.js';

const reasonOf = (s: AbortSignal) => {
  const r = s.reason as Error | undefined;
  return r ? `${r.name}: ${r.message}` : 'none';
};

describe('same-settings restore', () => {
  it('an idle client (live session, no lock) notices the restore; its resurrected key does not wedge the lock', async () => {
    await using etcd = await startEtcd({ provider: 'binary' });
    const lockPrefix = uniquePrefix('restore-idle');
    const admin = etcdClient(etcd.endpoints);
    try {
      await using a = await connect({
        endpoints: etcd.endpoints,
        lockPrefix,
        recheckIntervalMs: 500,
        session: { ttlSeconds: 10 },
      });
      onCleanup(a, () => {});
      const lockA = await a.acquire('job');
      const session = lockA.session; // the shared session: it stays alive after release
      const snapshot = await etcd.members[0]!.snapshot();
      await lockA.release();
      for (let i = 0; i < 5; i++) await admin.put('/unrelated').value(String(i));
      const before = await admin.get('/unrelated').exec();
      await etcd.restore(snapshot);
      const after = await waitFor(() => admin.get('/unrelated').exec(), {
        timeoutMs: 10_000,
        what: 'restored cluster answers',
      });
      console.log(
        `[restore-idle] revision before restore ${before.header.revision} term ${before.header.raft_term}; after ${after.header.revision} term ${after.header.raft_term}`,
      );

      // README: idle clients notice within recheckIntervalMs (500 ms here). Give it 20 intervals.
      const noticed = await waitFor(() => session.isLost, { timeoutMs: 10_000 }).then(
        () => true,
        () => false,
      );
      const keys = await admin.getAll().prefix(`${lockPrefix}job/`).keys();
      await using b = await connect({ endpoints: etcd.endpoints, lockPrefix });
      const tried = await b.tryAcquire('job').then(
        async (l) => {
          await l.release();
          return `acquired (token ${l.token})`;
        },
        (e: unknown) =>
          isLockTakenError(e)
            ? `LockTakenError holder ${e.holderKey} token ${e.holderToken}`
            : String(e),
      );
      console.log(
        `[restore-idle] 10 s after the restore: A's session lost=${session.isLost} (reason ${reasonOf(session.signal)}); A holds nothing; keys under job/: ${JSON.stringify(keys)}; A released key ${lockA.key}; B.tryAcquire: ${tried}`,
      );
      expect(noticed, 'idle client noticed the restore (ClusterChangedError)').toBe(true);
      expect(isClusterChangedError(session.signal.reason)).toBe(true);
      // A stopped keeping its lease alive, so the key it had released goes with it: the lock is
      // free again within the lease's TTL (10 s), whoever asks.
      const lockB = await b.acquire('job', { timeoutMs: 15_000 });
      expect(lockB.isHeld).toBe(true);
      await lockB.release();
    } finally {
      admin.close();
    }
  }, 90_000);

  it('a client cut off during the restore, whose revision and term were caught up, goes on consistently and leaves nothing wedged', async () => {
    await using etcd = await startEtcd({ provider: 'binary' });
    const lockPrefix = uniquePrefix('restore-term');
    const admin = etcdClient(etcd.endpoints);
    try {
      await using proxy = await TcpFaultProxy.start({ target: etcd.endpoints[0]! });
      await using a = await connect({
        endpoints: [proxy.url],
        lockPrefix,
        recheckIntervalMs: 500,
        callTimeoutMs: 1_000,
        session: { ttlSeconds: 20 },
      });
      onCleanup(a, () => {});
      const keep = await a.acquire('keep'); // in the snapshot: A keeps checking all along
      const job = await a.acquire('job');
      const snapshot = await etcd.members[0]!.snapshot();
      await job.release(); // gone in the old history, back in the restored one
      for (let i = 0; i < 20; i++) await admin.put('/unrelated').value(String(i));
      // A learns the newest revision from its own answer (a fenced write under 'keep').
      const seen = await keep.put('/a-write', 'x');
      const old = await admin.get('/unrelated').exec();
      expect(BigInt(old.header.revision)).toBe(seen);

      proxy.setMode('stall'); // A is cut off while operators restore
      await etcd.restore(snapshot);
      // README recovery for etcd 3.4: write until the revision is above every token issued.
      let rev = 0n;
      for (let i = 0; rev <= BigInt(old.header.revision) + 5n; i++) {
        const r = await admin.put('/bump').value(String(i)).exec();
        rev = BigInt(r.header.revision);
      }
      const bumped = await admin.get('/bump').exec();
      console.log(
        `[restore-term] old history: revision ${old.header.revision} raft term ${old.header.raft_term}; restored and bumped: revision ${bumped.header.revision} raft term ${bumped.header.raft_term}`,
      );
      proxy.setMode('pass');

      const noticed = await waitFor(() => keep.session.isLost, { timeoutMs: 10_000 }).then(
        () => true,
        () => false,
      );
      const keys = await admin.getAll().prefix(`${lockPrefix}job/`).keys();
      console.log(
        `[restore-term] 10 s after healing: A's session lost=${keep.session.isLost} (${reasonOf(keep.session.signal)}); A still believes it holds 'keep': ${keep.isHeld}; keys under job/ (A released it): ${JSON.stringify(keys)}`,
      );
      // It cannot notice (same cluster id, revision and term past what it saw) ...
      expect(noticed).toBe(false);
      // ... but its hold is one the restored history has, with the same token ...
      const kept = await admin.get(keep.key).exec();
      expect(BigInt(kept.kvs[0]!.create_revision)).toBe(keep.token);
      expect(keep.isHeld).toBe(true);
      // ... and the key it had released, back in the restored history, is swept: not wedged.
      expect(keys).toEqual([]);
      await using b = await connect({ endpoints: etcd.endpoints, lockPrefix });
      const lockB = await b.tryAcquire('job');
      await lockB.release();
    } finally {
      admin.close();
    }
  }, 90_000);
});
