/**
 * What the members of a test cluster report about themselves: who leads, and which member
 * carries a client's keepalive streams (from etcd's own gRPC metrics), so a fault can be aimed
 * at the member a session depends on.
 */
import type { EtcdCluster } from '@leasehold/testing';
import { waitFor } from './etcd.js';

/** etcd's Maintenance.Status through the gRPC gateway: this member's id and the leader's. */
export async function status(url: string): Promise<{ member: string; leader: string } | undefined> {
  try {
    const res = await fetch(`${url}/v3/maintenance/status`, {
      method: 'POST',
      body: '{}',
      signal: AbortSignal.timeout(1_000),
    });
    const body = (await res.json()) as { header?: { member_id?: string }; leader?: string };
    if (!body.header?.member_id || !body.leader || body.leader === '0') return undefined;
    return { member: body.header.member_id, leader: body.leader };
  } catch {
    return undefined; // paused, stopped, or not yet part of a quorum
  }
}

/**
 * Resolves with the time since `t0` at which every member but `gone` names the same leader, and
 * it is not `old` (polled every 20 ms): how long etcd itself took to elect a new leader.
 */
export async function newLeaderAfter(
  cluster: EtcdCluster,
  gone: number,
  old: string,
  t0: number,
  timeoutMs = 15_000,
): Promise<number> {
  const others = cluster.members.filter((_, i) => i !== gone);
  return waitFor(
    async () => {
      const all = await Promise.all(others.map((m) => status(m.clientUrl)));
      const leader = all[0]?.leader;
      const agreed = all.every((s) => s !== undefined && s.leader === leader);
      return agreed && leader !== old ? performance.now() - t0 : undefined;
    },
    { timeoutMs, intervalMs: 20, what: 'a new leader' },
  );
}

/** Index (in `cluster.members`) of the member every running member names as leader. */
export async function leaderIndex(cluster: EtcdCluster, timeoutMs = 15_000): Promise<number> {
  return waitFor(
    async () => {
      const all = await Promise.all(cluster.members.map((m) => status(m.clientUrl)));
      const live = all.filter((s) => s !== undefined);
      const leader = live[0]?.leader;
      if (live.length < 2 || live.some((s) => s.leader !== leader)) return undefined;
      const index = all.findIndex((s) => s?.member === leader);
      return index >= 0 ? index + 1 : undefined; // +1: 0 would read as "not yet"
    },
    { timeoutMs, what: 'members agreeing on a leader' },
  ).then((i) => i - 1);
}

/** Sum of one metric's samples on a member whose labels contain `match`. */
function sum(metrics: string, name: string, match: string): number {
  let total = 0;
  for (const line of metrics.split('\n')) {
    if (line.startsWith(`${name}{`) && line.includes(match)) {
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return total;
}

/**
 * LeaseKeepAlive streams started on each member so far. A count that only grows: with open
 * streams (started less finished), a previous stream counted as finished only now would cancel
 * out a new one on the same member.
 */
export async function keepAliveStreamsStarted(cluster: EtcdCluster): Promise<number[]> {
  return Promise.all(
    cluster.members.map(async (m) => {
      const text = await fetch(`${m.clientUrl}/metrics`, {
        signal: AbortSignal.timeout(2_000),
      }).then((r) => r.text());
      return sum(text, 'grpc_server_started_total', 'grpc_method="LeaseKeepAlive"');
    }),
  );
}

/**
 * Makes sessions with `make` until one's keepalive stream opens on member `target` (each new
 * stream goes to a member picked at random), closing the others. Returns that session.
 * 40 tries miss one member of three with odds of (2/3)^40, about 1e-7, if the pick is uniform;
 * the error says where the streams went, so a pick that is not shows as one.
 */
export async function sessionOnMember<S extends { close(): Promise<void> }>(
  cluster: EtcdCluster,
  target: number,
  make: () => Promise<S>,
): Promise<S> {
  const landed = cluster.members.map(() => 0);
  for (let tries = 0; tries < 40; tries++) {
    const before = await keepAliveStreamsStarted(cluster);
    const session = await make();
    const on = await waitFor(
      async () => {
        const now = await keepAliveStreamsStarted(cluster);
        const i = now.findIndex((n, j) => n > before[j]!);
        return i >= 0 ? i + 1 : undefined;
      },
      { timeoutMs: 5_000, what: "the new session's keepalive stream on some member" },
    ).then((i) => i - 1);
    landed[on]!++;
    if (on === target) return session;
    await session.close();
  }
  throw new Error(
    `no session's keepalive stream landed on member ${target} in 40 tries (streams per member: ${landed.join(', ')})`,
  );
}

/**
 * Tries `op` until it succeeds (giving up 30 s after `t0`); resolves with the ms since `t0` of
 * the first success. Each failure is noted in `errors`, with `label` and when it came.
 */
export async function firstSuccess(
  t0: number,
  op: () => Promise<unknown>,
  errors: string[],
  label?: string,
): Promise<number> {
  const giveUpAt = t0 + 30_000;
  for (;;) {
    try {
      await op();
      return performance.now() - t0;
    } catch (err) {
      const at = (performance.now() - t0).toFixed(0);
      errors.push(`${label ? `${label} ` : ''}@${at} ms: ${(err as Error).message}`);
      if (performance.now() > giveUpAt) throw err;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }
}
