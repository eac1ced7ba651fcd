/**
 * A leader change extends every lease on the server: the new leader restarts each lease's TTL
 * (plus an election timeout) when it takes over. The SDK does not see that and must not need
 * to: its local deadline counts from the send time of the last answered keepalive, so it stays
 * at or before the server's expiry whatever the server does. Checked by reading the lease's TTL
 * from another client before and after the change, several times across a keepalive.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from '@leasehold/core';
import { startEtcd, type EtcdCluster } from '@leasehold/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, uniquePrefix, waitFor } from '../setup/etcd.js';
import { leaderIndex, newLeaderAfter, status } from '../setup/members.js';

/** Long enough that the leader change comes between two keepalives (every TTL/3 = 10 s). */
const TTL_SECONDS = 30;

/** Runs `etcdctl move-leader`: leadership goes to `to` (decimal member id) without an outage. */
async function moveLeader(leaderUrl: string, to: string): Promise<void> {
  const child = spawn(
    process.env.ETCDCTL_BIN ?? 'etcdctl',
    ['move-leader', BigInt(to).toString(16), `--endpoints=${leaderUrl}`, '--command-timeout=5s'],
    { env: { ...process.env, ETCDCTL_API: '3' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const closed = once(child, 'close') as Promise<[number | null]>;
  const [code] = await waitFor(() => closed, { timeoutMs: 15_000, what: 'etcdctl move-leader' });
  if (code !== 0) throw new Error(`etcdctl move-leader failed (${String(code)}): ${output}`);
}

describe('a lease extended by an etcd leader change', () => {
  let cluster: EtcdCluster;
  beforeAll(async () => {
    cluster = await startEtcd({ members: 3, provider: 'local' });
  });
  afterAll(() => cluster?.close());

  it.each(['move-leader', 'kill-leader'] as const)(
    "%s: the session's local deadline is never later than the server's expiry",
    async (how) => {
      const lockPrefix = uniquePrefix(`leader-change-${how}`);
      await using client = await connect({ endpoints: cluster.endpoints, lockPrefix });
      const session = await client.session({ ttlSeconds: TTL_SECONDS });
      const lock = await client.acquire('job', { session });
      const admin = etcdClient(cluster.endpoints);
      const leader = await leaderIndex(cluster);
      const samples: string[] = [];
      let killed = false;
      try {
        /** One comparison: the server's TTL, then the local deadline (read after: no later). */
        const sample = async (label: string) => {
          const res = await waitFor(
            () =>
              admin.leaseClient.leaseTimeToLive(
                { ID: session.leaseId.toString() },
                { deadline: Date.now() + 1_000 },
              ),
            { timeoutMs: 10_000, what: `the lease's TTL from the server (${label})` },
          );
          const localMs = Math.round(session.timeLeftMs());
          const serverTtl = Number(res.TTL);
          samples.push(`${label}: local ${localMs} ms, server ${serverTtl} s`);
          // etcd truncates the time left to whole seconds: the lease expires less than TTL + 1 s
          // after the server answered, and the local deadline was read later than that.
          expect(localMs, samples.join('; ')).toBeLessThan((serverTtl + 1) * 1000);
          expect(localMs).toBeGreaterThan(0);
          return { localMs, serverTtl };
        };
        // Let the TTL run down a little first, so the server's extension shows.
        await waitFor(async () => (await sample('waiting')).serverTtl <= TTL_SECONDS - 4, {
          timeoutMs: 15_000,
          intervalMs: 500,
          what: 'the lease to run down 4 s',
        });
        const before = await sample('before');

        const t0 = performance.now();
        const old = (await status(cluster.members[leader]!.clientUrl))!.member;
        const next = (leader + 1) % 3;
        if (how === 'move-leader') {
          const to = (await status(cluster.members[next]!.clientUrl))!.member;
          await moveLeader(cluster.members[leader]!.clientUrl, to);
        } else {
          await cluster.members[leader]!.kill();
          killed = true;
        }
        const electedMs = await newLeaderAfter(
          cluster,
          how === 'kill-leader' ? leader : -1,
          old,
          t0,
        );
        const after = await sample('right after the change');
        // Sample across the next keepalive (10 s apart), 1 s apart.
        for (let i = 1; i <= 12; i++) {
          await new Promise((resolve) => setTimeout(resolve, 1_000));
          await sample(`+${i} s`);
        }
        console.log(
          `[leader-change] ${how}: new leader after ${electedMs.toFixed(0)} ms; ${samples.join('; ')}`,
        );
        // The change came 4-6 s before the next keepalive: the server's TTL went back up (the
        // new leader refreshed the lease), the local deadline went on counting down. (A killed
        // leader may have carried the keepalive stream: its replacement renews at once.)
        expect(after.serverTtl).toBeGreaterThan(before.serverTtl);
        if (how === 'move-leader') expect(after.localMs).toBeLessThanOrEqual(before.localMs);
        expect(session.isLost).toBe(false);
        expect(lock.isHeld).toBe(true);
      } finally {
        admin.close();
        if (killed) await cluster.members[leader]!.start();
        await leaderIndex(cluster);
      }
    },
    120_000,
  );
});
