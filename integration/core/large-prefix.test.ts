/**
 * The watch's periodic read of the whole lock prefix keeps working however many keys the prefix
 * holds: it reads in pages at one revision, each far below gRPC's 4 MiB message limit. Here the
 * prefix holds thousands of other lock-shaped keys with ~1 KB names (more than 4 MiB keys-only),
 * and the scenes need the read to work: a hold or a waiter whose key is not in a restored history.
 * LEASEHOLD_LARGE_PREFIX_FILL=0 runs the same scenes on a small prefix.
 */
import { connect, type Lock } from '@leasehold/core';
import { startEtcd } from '@leasehold/testing';
import type { Etcd3 } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { etcdClient, onCleanup, uniquePrefix, waitFor } from '../setup/etcd.js';

const fill = Number(process.env.LEASEHOLD_LARGE_PREFIX_FILL ?? 4_500);

/** Other holds under the prefix: `fill` keys with ~1 KB names (4,500 → ~4.7 MB keys-only). */
async function fillPrefix(admin: Etcd3, lockPrefix: string): Promise<number> {
  const long = 'x'.repeat(1_000);
  for (let i = 0; i < fill; i += 100) {
    const puts = [];
    for (let j = i; j < Math.min(fill, i + 100); j++) {
      const key = Buffer.from(`${lockPrefix}other${j}-${long}/1`);
      puts.push({ request_put: { key, value: Buffer.alloc(0) } });
    }
    await admin.kv.txn({ compare: [], success: puts, failure: [] });
  }
  return admin.getAll().prefix(lockPrefix).count();
}

describe('the periodic check with a large lock prefix', () => {
  it('a hold whose key is not in the restored history stops believing it holds, whatever the prefix size', async () => {
    await using etcd = await startEtcd({ provider: 'binary' });
    const lockPrefix = uniquePrefix('large-prefix');
    const admin = etcdClient(etcd.endpoints);
    try {
      const others = await fillPrefix(admin, lockPrefix);
      await using a = await connect({
        endpoints: etcd.endpoints,
        lockPrefix,
        recheckIntervalMs: 500,
        session: { ttlSeconds: 60 },
      });
      onCleanup(a, () => {});
      const session = await a.session({ ttlSeconds: 60 }); // granted before the snapshot
      const snapshot = await etcd.members[0]!.snapshot();
      const lockA = await a.acquire('job', { session }); // not in the snapshot
      await etcd.restore(snapshot);

      await using b = await connect({ endpoints: etcd.endpoints, lockPrefix });
      const lockB = await b.acquire('job', { timeoutMs: 10_000 });
      const keys = await admin.getAll().prefix(`${lockPrefix}job/`).keys();
      // 20 of A's recheck intervals.
      const outcome = await waitFor(() => !lockA.isHeld, { timeoutMs: 10_000 }).then(
        () => 'lost within 10 s',
        () => 'still held 10 s later',
      );
      console.log(
        `[large-prefix] ${others} other keys under the prefix; A token ${lockA.token}: ${outcome} (B acquired token ${lockB.token}, held=${lockB.isHeld}); keys under job/: ${JSON.stringify(keys)} (A's key ${lockA.key})`,
      );
      expect(outcome).toBe('lost within 10 s');
      await lockB.release();
    } finally {
      admin.close();
    }
  }, 120_000);

  it('a waiter whose key is not in the restored history is never told it is first', async () => {
    await using etcd = await startEtcd({ provider: 'binary' });
    const lockPrefix = uniquePrefix('large-prefix-w');
    const admin = etcdClient(etcd.endpoints);
    try {
      const others = await fillPrefix(admin, lockPrefix);
      await using b = await connect({ endpoints: etcd.endpoints, lockPrefix });
      const lockB = await b.acquire('job'); // the holder, in the snapshot
      await using a = await connect({
        endpoints: etcd.endpoints,
        lockPrefix,
        recheckIntervalMs: 500,
        session: { ttlSeconds: 60 },
      });
      onCleanup(a, () => {});
      const session = await a.session({ ttlSeconds: 60 }); // granted before the snapshot
      const snapshot = await etcd.members[0]!.snapshot();
      const waiting = a.acquire('job', { session }); // A's key: not in the snapshot
      waiting.catch(() => {}); // inspected below
      const waiterKey = `${lockPrefix}job/${session.leaseId.toString(16)}`;
      await waitFor(async () => (await admin.get(waiterKey).exec()).kvs.length === 1, {
        what: 'A queued',
      });
      const queued = await admin.get(waiterKey).exec();
      await etcd.restore(snapshot);
      // The restored history moves on (other clients' writes) past what A had seen...
      let revision = 0n;
      for (let i = 0; revision <= BigInt(queued.header.revision) + 2n; i++) {
        revision = BigInt((await admin.put('/other').value(String(i)).exec()).header.revision);
      }
      // ...and the holder ahead of A releases.
      await lockB.release();
      const outcome = await waitFor(() => waiting.then((l: Lock) => l), { timeoutMs: 10_000 }).then(
        (l) => `acquire resolved: token ${l.token}, isHeld ${l.isHeld}`,
        (e: unknown) => `no lock within 10 s (${(e as Error).message.slice(0, 80)})`,
      );
      const keys = await admin.getAll().prefix(`${lockPrefix}job/`).keys();
      console.log(
        `[large-prefix] ${others} other keys under the prefix; waiter A (key ${waiterKey}): ${outcome}; keys under job/ now: ${JSON.stringify(keys)}`,
      );
      expect(
        outcome.startsWith('acquire resolved'),
        'A was told it holds a lock whose key does not exist',
      ).toBe(false);
    } finally {
      admin.close();
    }
  }, 120_000);
});
