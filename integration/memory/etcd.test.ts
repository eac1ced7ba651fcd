/** The behaviour suite against the integration run's real etcd: time is real time. */
import { connect } from '@leasehold/core';
import { afterAll } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { monitorLoopLag } from '../setup/lag.js';
import { describeBehaviour, type World } from './behaviour.js';

const raw = etcdClient(sharedEndpoints());
const lag = monitorLoopLag();
afterAll(() => {
  raw.close();
  lag[Symbol.dispose]();
});

/** A budget of real time: the event's own bound plus what this host's loop lag has cost. */
const real = (budgetMs: number) => budgetMs + lag.maxLagMs;

function etcdWorld(): World {
  return {
    client: (prefixes) => connect({ endpoints: sharedEndpoints(), ...prefixes }),
    keys: async (prefix) => {
      const kvs = await raw.getAll().prefix(prefix).exec();
      return kvs.kvs.map((kv) => ({
        key: kv.key.toString(),
        createRevision: BigInt(kv.create_revision),
      }));
    },
    killHolder: async (_client, leaseId) => {
      await raw.leaseClient.leaseRevoke({ ID: leaseId.toString() });
    },
    within: async (promise, budgetMs, what) => {
      let timer: NodeJS.Timeout | undefined;
      const ms = real(budgetMs);
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
      });
      try {
        return await Promise.race([promise, late]);
      } finally {
        clearTimeout(timer);
      }
    },
    until: async (check, budgetMs, what) => {
      await waitFor(check, { timeoutMs: real(budgetMs), intervalMs: 10, what });
    },
    revokeLease: async (leaseId) =>
      void (await raw.leaseClient.leaseRevoke({ ID: leaseId.toString() })),
    deleteKey: async (key) => void (await raw.delete().key(key).exec()),
    prefix: uniquePrefix,
  };
}

describeBehaviour('real etcd', etcdWorld);
