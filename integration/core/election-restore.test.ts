/**
 * Elections across a snapshot restore with the same member settings (same cluster id, history
 * rewound): a client that only observes learns of the change from its periodic read, not from
 * any watch event, and must still end its loop with `ClusterChangedError` rather than wait
 * forever; a client running `lead()` ends it with the same error.
 */
import { connect, isClusterChangedError, type LeaderState } from '@leasehold/core';
import { startEtcd } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { etcdClient, uniquePrefix, waitFor } from '../setup/etcd.js';

/** Runs an observe loop to its end: `ok` if it ended, or the error it threw. */
async function drain(states: AsyncIterable<LeaderState>, seen: LeaderState[]) {
  try {
    for await (const state of states) seen.push(state);
    return { ok: true as const };
  } catch (error) {
    return { ok: false as const, error };
  }
}

describe('elections and a snapshot restore', () => {
  it('observe() throws ClusterChangedError, on an observing-only client too, and lead() rejects with it', async () => {
    await using etcd = await startEtcd({ provider: 'local' });
    const electionPrefix = uniquePrefix('restore-elect');
    const admin = etcdClient(etcd.endpoints);
    try {
      await admin.put(`${electionPrefix}pad`).value('0');
      const snapshot = await etcd.members[0]!.snapshot();
      // The live history moves well past the snapshot, so the restore rewinds revisions.
      for (let i = 0; i < 50; i++) await admin.put(`${electionPrefix}pad`).value(String(i));
      await using watcher = await connect({ endpoints: etcd.endpoints, electionPrefix });
      await using leader = await connect({
        endpoints: etcd.endpoints,
        electionPrefix,
        session: { ttlSeconds: 5 },
      });
      const [onlySeen, leaderSeen] = [[] as LeaderState[], [] as LeaderState[]];
      const observedOnly = drain(watcher.observe('e'), onlySeen);
      const observedByLeader = drain(leader.observe('e'), leaderSeen);
      const tokens: bigint[] = [];
      const leading = leader
        .lead('e', 'L', async ({ token, signal }) => {
          tokens.push(token);
          await new Promise((resolve) => signal.addEventListener('abort', resolve));
        })
        .then(
          () => ({ ok: true as const }),
          (error: unknown) => ({ ok: false as const, error }),
        );
      await waitFor(() => onlySeen.some((s) => s.leader?.value === 'L'), {
        timeoutMs: 10_000,
        what: 'the observing client sees the leader',
      });
      await etcd.restore(snapshot);
      // The periodic read (every 5 s by default) is what finds the rewound history.
      for (const [name, outcome] of [
        ['observing-only client', observedOnly],
        ['leading client', observedByLeader],
        ['lead()', leading],
      ] as const) {
        const result = await waitFor(() => outcome, { timeoutMs: 20_000, what: `${name} ends` });
        expect(result.ok, name).toBe(false);
        expect(isClusterChangedError(!result.ok && result.error), name).toBe(true);
      }
      expect(tokens.length).toBeGreaterThan(0);
    } finally {
      admin.close();
    }
  }, 90_000);
});
