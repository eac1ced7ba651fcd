/** The behaviour suite against `memoryClient()`: time is the memory clock, advanced on demand. */
import { memoryClient, memoryEtcd, type MemoryEtcd } from '@leasehold/testing/memory';
import { randomBytes } from 'node:crypto';
import { describeBehaviour, type World } from './behaviour.js';

/** How far the clock moves per step while a case waits: finer than any timer it waits on. */
const STEP_MS = 10;

function memoryWorld(): World {
  const etcd: MemoryEtcd = memoryEtcd();
  const step = async (elapsedMs: number, budgetMs: number, what: string) => {
    if (elapsedMs >= budgetMs) {
      throw new Error(`${what}: not within ${budgetMs} ms of memory-clock time`);
    }
    await etcd.clock.advance(STEP_MS);
  };
  return {
    client: (prefixes) => memoryClient({ etcd, ...prefixes }),
    keys: async (prefix) =>
      etcd.keys(prefix).map(({ key, createRevision }) => ({ key, createRevision })),
    killHolder: async (client, leaseId, ttlSeconds) => {
      etcd.pause(client);
      for (let ms = 0; etcd.leases().includes(leaseId); ms += STEP_MS) {
        await step(ms, ttlSeconds * 1000 + STEP_MS, `lease ${leaseId} expires`);
      }
      etcd.resume(client);
    },
    within: async (promise, budgetMs, what) => {
      let settled = false;
      const done = promise.finally(() => (settled = true));
      done.catch(() => {});
      for (let ms = 0; !settled; ms += STEP_MS) {
        await etcd.clock.settle();
        if (!settled) await step(ms, budgetMs, what);
      }
      return done;
    },
    until: async (check, budgetMs, what) => {
      for (let ms = 0; !(await check()); ms += STEP_MS) await step(ms, budgetMs, what);
    },
    revokeLease: async (leaseId) => void etcd.revokeLease(leaseId),
    deleteKey: async (key) => void etcd.delete(key),
    prefix: (label) => `/t/${label}-${randomBytes(4).toString('hex')}/`,
  };
}

describeBehaviour('memoryClient', memoryWorld);
