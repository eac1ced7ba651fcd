import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import {
  isEtcdHarnessError,
  resolveEtcdProvider,
  startEtcd,
  type EtcdProviderName,
} from '@leasehold/testing';
import type { Etcd3 } from 'etcd3';
import { describe, expect, inject, it } from 'vitest';
import { deadlineIn, etcdClient, uniquePrefix, waitFor } from '../setup/etcd.js';

// Each provider must be present on CI; elsewhere a missing one is skipped with the reason printed.
async function unavailableReason(provider: EtcdProviderName): Promise<string | undefined> {
  try {
    await resolveEtcdProvider({ provider });
    return undefined;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    console.warn(`[leasehold] ${provider} snapshot tests skipped: ${reason}`);
    return reason;
  }
}

const providers = [
  { provider: 'binary' as const, skip: await unavailableReason('binary') },
  { provider: 'container' as const, skip: await unavailableReason('container') },
];

/** Cluster ID and revision as the member behind `client` reports them (a linearizable read). */
async function header(client: Etcd3, key: string) {
  const response = await client.get(key).options(deadlineIn(2000)).exec();
  return { clusterId: response.header.cluster_id, revision: Number(response.header.revision) };
}

describe.each(providers)('$provider provider', ({ provider, skip }) => {
  it.skipIf(skip !== undefined).each([1, 3] as const)(
    '%i member(s): restore keeps the cluster id and goes back to the snapshot revision',
    async (members) => {
      const cluster = await startEtcd({ provider, members });
      const all = etcdClient(cluster.endpoints);
      const each = cluster.endpoints.map((endpoint) => etcdClient(endpoint));
      try {
        const prefix = uniquePrefix(`${provider}-restore-${members}`);
        for (let i = 0; i < 5; i++) await all.put(`${prefix}k${i}`).value(`before-${i}`);
        const atSnapshot = await header(all, `${prefix}k0`);
        const idsBefore = (await all.cluster.memberList({})).members.map((m) => m.ID).sort();

        const t0 = performance.now();
        const file = await cluster.members[0]!.snapshot();
        const saveMs = performance.now() - t0;
        expect(existsSync(file)).toBe(true);

        await all.put(`${prefix}k0`).value('after');
        for (let i = 0; i < 5; i++) await all.put(`${prefix}late${i}`).value('x');
        const beforeRestore = await header(all, `${prefix}k0`);
        expect(beforeRestore.revision).toBeGreaterThan(atSnapshot.revision);

        const t1 = performance.now();
        await cluster.restore(file);
        const restoreMs = performance.now() - t1;
        console.log(
          `[leasehold] ${provider} ${members}-member: snapshot saved in ${Math.round(saveMs)} ms, ` +
            `restore (kill, restore, start, healthy) took ${Math.round(restoreMs)} ms`,
        );

        // Same cluster, back at the snapshot: every member says so.
        for (const client of each) {
          const after = await waitFor(() => header(client, `${prefix}k0`), {
            what: 'a read after restore',
          });
          expect(after.clusterId).toBe(atSnapshot.clusterId);
          expect(after.revision).toBe(atSnapshot.revision);
          expect(after.revision).toBeLessThan(beforeRestore.revision);
        }
        expect(await all.get(`${prefix}k0`).string()).toBe('before-0');
        expect(await all.get(`${prefix}late0`).string()).toBeNull();
        expect((await all.cluster.memberList({})).members.map((m) => m.ID).sort()).toEqual(
          idsBefore,
        );
        expect(cluster.endpoints).toEqual(cluster.members.map((m) => m.clientUrl));

        // The restored cluster takes writes, counting on from the snapshot's revision.
        await all.put(`${prefix}new`).value('1');
        expect((await header(all, `${prefix}new`)).revision).toBe(atSnapshot.revision + 1);
        // Members stay controllable after a restore.
        await cluster.members[0]!.restart();
        expect(
          await waitFor(() => each[0]!.get(`${prefix}new`).options(deadlineIn(1000)).string(), {
            what: 'a read after restart',
          }),
        ).toBe('1');
      } finally {
        for (const client of [...each, all]) client.close();
        await Promise.all([cluster.close(), cluster.close()]);
      }
      await expect(cluster.restore('/nonexistent')).rejects.toMatchObject({
        code: 'ETCD_INVALID_OPTION',
      });
    },
  );

  it.skipIf(skip !== undefined)(
    '3 members restored under a new cluster token: new cluster and member ids, same URLs, revision back',
    async () => {
      const cluster = await startEtcd({ provider, members: 3 });
      const all = etcdClient(cluster.endpoints);
      let after: Etcd3 | undefined;
      try {
        const prefix = uniquePrefix(`${provider}-restore-token`);
        await all.put(`${prefix}k`).value('before');
        const atSnapshot = await header(all, `${prefix}k`);
        const idsBefore = (await all.cluster.memberList({})).members.map((m) => m.ID).sort();
        const file = await cluster.members[0]!.snapshot();
        await all.put(`${prefix}k`).value('after');
        await cluster.restore(file, { clusterToken: 'rebuilt-under-new-settings' });
        after = etcdClient(cluster.endpoints);
        const rebuilt = await waitFor(() => header(after!, `${prefix}k`), {
          what: 'a read after restore',
        });
        expect(rebuilt.clusterId).not.toBe(atSnapshot.clusterId);
        expect(rebuilt.revision).toBe(atSnapshot.revision);
        expect(await after.get(`${prefix}k`).string()).toBe('before');
        const idsAfter = (await after.cluster.memberList({})).members.map((m) => m.ID).sort();
        expect(idsAfter).toHaveLength(3);
        expect(idsAfter.filter((id) => idsBefore.includes(id))).toEqual([]);
        // Members stay controllable: a restarted member rejoins the rebuilt cluster.
        await cluster.members[1]!.restart();
        const client = etcdClient(cluster.members[1]!.clientUrl);
        try {
          const again = await waitFor(() => header(client, `${prefix}k`), {
            what: 'a read from the restarted member',
          });
          expect(again.clusterId).toBe(rebuilt.clusterId);
        } finally {
          client.close();
        }
      } finally {
        all.close();
        after?.close();
        await cluster.close();
      }
    },
  );

  it.skipIf(skip !== undefined)(
    'a bad snapshot is refused, a failed restore keeps the old data, a stopped member cannot snapshot',
    async () => {
      const cluster = await startEtcd({ provider });
      const client = etcdClient(cluster.endpoints);
      try {
        const member = cluster.members[0]!;
        const key = `${uniquePrefix(`${provider}-bad-snapshot`)}k`;
        await client.put(key).value('v');
        const good = await member.snapshot();
        const bad = `${good}.bad`;
        await writeFile(bad, 'not a snapshot');
        const refused: unknown = await cluster.restore(bad).catch((e: unknown) => e);
        expect(isEtcdHarnessError(refused)).toBe(true);
        expect(refused).toMatchObject({ code: 'ETCD_INVALID_OPTION' });
        expect((refused as Error).message).toMatch(/not an etcd snapshot/);
        expect(await client.get(key).options(deadlineIn(1000)).string()).toBe('v');

        // Checksum fine, contents not a database: etcdctl itself fails. The members are left
        // stopped with their old data, and start() brings them back.
        const garbage = Buffer.alloc(8192, 7);
        const fake = `${good}.fake`;
        await writeFile(
          fake,
          Buffer.concat([garbage, createHash('sha256').update(garbage).digest()]),
        );
        const failed: unknown = await cluster.restore(fake).catch((e: unknown) => e);
        expect(failed).toMatchObject({ code: 'ETCD_SNAPSHOT_FAILED' });
        expect((failed as Error).message).toMatch(/snapshot restore/);
        await member.start();
        expect(
          await waitFor(() => client.get(key).options(deadlineIn(1000)).string(), {
            what: 'the old data after a failed restore',
          }),
        ).toBe('v');

        await member.stop();
        const t0 = performance.now();
        await expect(member.snapshot()).rejects.toMatchObject({
          code: expect.stringMatching(/ETCD_SNAPSHOT_FAILED|ETCD_INVALID_OPTION/) as unknown,
        });
        expect(performance.now() - t0).toBeLessThan(5000);
      } finally {
        client.close();
        await cluster.close();
      }
      await expect(cluster.members[0]!.snapshot()).rejects.toThrow();
    },
  );
});

describe("the 'external' provider", () => {
  it('rejects restore with an EtcdHarnessError, and has no members to snapshot', async () => {
    const saved = process.env.ETCD_ENDPOINTS;
    process.env.ETCD_ENDPOINTS = inject('etcdEndpoints').join(',');
    try {
      const cluster = await startEtcd({ provider: 'external' });
      expect(cluster.members).toEqual([]);
      const error: unknown = await cluster.restore('/tmp/any.db').catch((e: unknown) => e);
      expect(isEtcdHarnessError(error)).toBe(true);
      expect(error).toMatchObject({ code: 'ETCD_INVALID_OPTION' });
      expect((error as Error).message).toMatch(/provider 'local'/);
      await cluster.close();
    } finally {
      if (saved === undefined) delete process.env.ETCD_ENDPOINTS;
      else process.env.ETCD_ENDPOINTS = saved;
    }
  });
});
