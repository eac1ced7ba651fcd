import { connect, type Leasehold } from '@leasehold/core';
import { describeFenceConformance } from '@leasehold/fence/conformance';
import { etcdStore, fencedTxn, padToken } from '@leasehold/fence/etcd';
import { isInvalidArgumentError, isStaleTokenError } from '@leasehold/fence';
import { isInvalidArgumentError as isCoreInvalidArgumentError } from '@leasehold/core';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const prefix = uniquePrefix('fence-etcd');

describeFenceConformance('etcd', async () => {
  const client = await connect({ endpoints });
  const reopened: Leasehold[] = [];
  return {
    store: etcdStore(client, { prefix }),
    reopen: async () => {
      const again = await connect({ endpoints });
      reopened.push(again);
      return etcdStore(again, { prefix });
    },
    close: async () => {
      await Promise.all([client, ...reopened].map((c) => c.close()));
    },
  };
});

describe('etcd fence with a real lock', () => {
  let client: Leasehold;
  const admin = new Etcd3({ hosts: endpoints });
  beforeAll(async () => {
    client = await connect({ endpoints, lockPrefix: `${prefix}lock/` });
  });
  afterAll(async () => {
    await client.close();
    admin.close();
  });

  it('refuses a put inside a lock or election queue (a lease-less key there would wedge it) and the fence key itself, writing nothing', async () => {
    const holder = await client.acquire('wedge-guard');
    const other = await connect({ endpoints, lockPrefix: `${prefix}lock/` });
    try {
      for (const key of [
        `${prefix}lock/victim/0`,
        `${client.electionPrefix}vote/0`,
        `${prefix}token/guarded`,
      ]) {
        const err = await fencedTxn(client, {
          prefix,
          resource: 'guarded',
          token: holder.token,
          ops: [{ type: 'put', key, value: 'x' }],
        }).catch((e: unknown) => e);
        expect(isInvalidArgumentError(err), `${key}: ${String(err)}`).toBe(true);
        expect(isCoreInvalidArgumentError(err)).toBe(true);
        expect((err as Error).message).toContain(JSON.stringify(key));
        expect(await admin.get(key).string()).toBeNull();
      }
      // The queue is free: another client takes the lock at once.
      await (await other.tryAcquire('victim')).release();
    } finally {
      await other.close();
      await holder.release();
    }
  });

  it('accepts writes under two lock names in token order and refuses the older holder', async () => {
    const store = etcdStore(client, { prefix });
    const first = await client.acquire('writer-a');
    const second = await client.acquire('writer-b'); // a later grant: a larger token
    expect(second.token > first.token).toBe(true);
    const dataKey = `${prefix}shared-config`;
    const write = (token: bigint, value: string) =>
      fencedTxn(client, {
        prefix,
        resource: 'shared-config',
        token,
        ops: [{ type: 'put', key: dataKey, value }],
      });
    const revision = await write(second.token, 'from-b');
    expect(revision > second.token).toBe(true);
    const err = await write(first.token, 'from-a').catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(true);
    expect(await admin.get(dataKey).string()).toBe('from-b');
    expect(await admin.get(store.fenceKey('shared-config')).string()).toBe(padToken(second.token));
    expect(await store.highestToken('shared-config')).toBe(second.token);
    await Promise.all([first.release(), second.release()]);
  });
});
