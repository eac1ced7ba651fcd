import { resolveEtcdProvider, startEtcd, type EtcdProviderName } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { deadlineIn, etcdClient, uniquePrefix, waitFor } from '../setup/etcd.js';

// Each provider must be present on CI; elsewhere a missing one is skipped with the reason printed.
async function unavailableReason(provider: EtcdProviderName): Promise<string | undefined> {
  try {
    await resolveEtcdProvider({ provider });
    return undefined;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    console.warn(`[leasehold] ${provider} provider tests skipped: ${reason}`);
    return reason;
  }
}

const providers = [
  { provider: 'binary' as const, skip: await unavailableReason('binary') },
  { provider: 'container' as const, skip: await unavailableReason('container') },
];

describe.each(providers)('$provider provider', ({ provider, skip }) => {
  it.skipIf(skip !== undefined)(
    '1 member serves put/get and survives pause, stop, kill and restart with its data',
    async () => {
      const t0 = performance.now();
      const cluster = await startEtcd({ provider, members: 1 });
      console.log(
        `[leasehold] ${provider} 1-member ready in ${Math.round(performance.now() - t0)} ms`,
      );
      const client = etcdClient(cluster.endpoints);
      try {
        expect(cluster.provider).toBe(provider);
        expect(cluster.endpoints).toHaveLength(1);
        const member = cluster.members[0]!;
        expect(member.clientUrl).toBe(cluster.endpoints[0]);
        expect(member.clientUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        const key = `${uniquePrefix(`${provider}-single`)}k`;
        const get = () => client.get(key).options(deadlineIn(1000)).string();

        await client.put(key).value('v1');
        expect(await get()).toBe('v1');

        await member.pause();
        // A frozen member holds the connection open and never answers: only the deadline ends the call.
        await expect(client.get(key).options(deadlineIn(300)).string()).rejects.toThrow();
        await member.resume();
        expect(await waitFor(get, { what: 'get after resume' })).toBe('v1');

        await member.stop();
        await expect(client.get(key).options(deadlineIn(500)).string()).rejects.toThrow();
        await member.start();
        expect(await waitFor(get, { what: 'get after stop/start' })).toBe('v1');

        await client.put(key).value('v2');
        await member.kill();
        await member.start();
        expect(await waitFor(get, { what: 'get after kill/start' })).toBe('v2');

        await member.restart();
        expect(await waitFor(get, { what: 'get after restart' })).toBe('v2');
        // Host networking / fixed ports: the URL never changes.
        expect(member.clientUrl).toBe(cluster.endpoints[0]);
      } finally {
        client.close();
        await cluster.close();
        await cluster.close(); // idempotent
      }
    },
  );

  it.skipIf(skip !== undefined)(
    '3 members form one cluster that keeps serving while a member is down or frozen',
    async () => {
      const t0 = performance.now();
      const cluster = await startEtcd({ provider, members: 3 });
      console.log(
        `[leasehold] ${provider} 3-member ready in ${Math.round(performance.now() - t0)} ms`,
      );
      const clients = cluster.endpoints.map((endpoint) => etcdClient(endpoint));
      const all = etcdClient(cluster.endpoints);
      try {
        expect(cluster.members.map((m) => m.name)).toEqual(['etcd1', 'etcd2', 'etcd3']);
        expect(new Set(cluster.endpoints).size).toBe(3);
        const list = await all.cluster.memberList({});
        expect(list.members).toHaveLength(3);

        const prefix = uniquePrefix(`${provider}-three`);
        const [c1, c2, c3] = clients as [typeof all, typeof all, typeof all];
        const [m1, m2, m3] = cluster.members as [
          (typeof cluster.members)[0],
          (typeof cluster.members)[0],
          (typeof cluster.members)[0],
        ];
        await c1.put(`${prefix}a`).value('1');
        // Linearizable read on another member sees the write.
        expect(await c3.get(`${prefix}a`).string()).toBe('1');

        await m3.kill();
        await waitFor(() => c1.put(`${prefix}b`).value('2').options(deadlineIn(1000)), {
          what: 'write with etcd3 killed',
        });
        await m3.start();
        expect(
          await waitFor(() => c3.get(`${prefix}b`).options(deadlineIn(1000)).string(), {
            what: 'etcd3 catching up after restart',
          }),
        ).toBe('2');

        await m1.pause();
        // If etcd1 led, the others elect a new leader within a few election timeouts.
        await waitFor(() => c2.put(`${prefix}c`).value('3').options(deadlineIn(1000)), {
          what: 'write with etcd1 frozen',
          timeoutMs: 15_000,
        });
        await m1.resume();
        expect(
          await waitFor(() => c1.get(`${prefix}c`).options(deadlineIn(1000)).string(), {
            what: 'etcd1 serving after resume',
          }),
        ).toBe('3');

        await m2.restart();
        expect(await c2.get(`${prefix}c`).options(deadlineIn(2000)).string()).toBe('3');
      } finally {
        for (const c of [...clients, all]) c.close();
        await cluster.close();
      }
    },
  );
});
