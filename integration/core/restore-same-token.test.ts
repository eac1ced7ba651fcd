/**
 * Cluster identity after a same-settings snapshot restore (same cluster id, history rewound),
 * when the restored history catches up with the revision the old holder had seen before its
 * next read (here one write does it: another process's acquire, which gets the very same token).
 * The old holder's lease is in the snapshot and its keepalives work; what gives the restore away
 * is the raft term, which a restore brings back down, and the holder's key, which the restored
 * history does not have (the watch's periodic read of the prefix shows it gone).
 */
import { connect, isClusterChangedError } from '@leasehold/core';
import { startEtcd } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { etcdClient, onCleanup, uniquePrefix, waitFor } from '../setup/etcd.js';

describe('snapshot restore with the same member settings', () => {
  it('a holder whose key is not in the restored history stops believing it holds once another process holds', async () => {
    await using etcd = await startEtcd({ provider: 'local' });
    const lockPrefix = uniquePrefix('restore');
    const admin = etcdClient(etcd.endpoints);
    try {
      await using a = await connect({
        endpoints: etcd.endpoints,
        lockPrefix, // default recheckIntervalMs (5 s)
        session: { ttlSeconds: 60 },
      });
      onCleanup(a, () => {});
      const session = await a.session({ ttlSeconds: 60 }); // granted before the snapshot
      const snapshot = await etcd.members[0]!.snapshot();
      const lockA = await a.acquire('job', { session }); // the first write after the snapshot
      await etcd.restore(snapshot);

      await using b = await connect({ endpoints: etcd.endpoints, lockPrefix });
      const lockB = await b.acquire('job', { timeoutMs: 10_000 });
      const keys = await admin.getAll().prefix(`${lockPrefix}job/`).keys();
      console.log(
        `[restore] A token ${lockA.token} (key ${lockA.key}); B token ${lockB.token} (key ${lockB.key}); keys in etcd: ${JSON.stringify(keys)}`,
      );
      // Give A three of its own recheck intervals (default 5 s) to notice.
      const outcome = await waitFor(() => !lockA.isHeld, { timeoutMs: 15_000 }).then(
        () => 'lost',
        () => 'still held',
      );
      console.log(
        `[restore] 15 s later A ${outcome} (session lost: ${session.isLost}, cluster-changed: ${isClusterChangedError(session.signal.reason)}); B held=${lockB.isHeld}; same token: ${lockA.token === lockB.token}`,
      );
      expect(outcome).toBe('lost');
      await lockB.release();
    } finally {
      admin.close();
    }
  }, 90_000);
});
