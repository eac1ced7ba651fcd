// Holds `count` different locks at once: leasehold on the one shared session, or etcd3's Lock
// (a lease each). Reports acquires per second and the memory held per lock (run with
// --expose-gc so both readings follow a full collection).
import { connect } from '@leasehold/core';
import { Etcd3 } from 'etcd3';
import { now } from '../lib/stats.mjs';
import { serve, workerConfig } from '../lib/workers.mjs';

const config = workerConfig();
const init = (async () => {
  const client = await connect({ endpoints: config.endpoints, lockPrefix: config.lockPrefix });
  await client.sharedSession();
  return client;
})();
const raw = new Etcd3({ hosts: config.endpoints });
let held = [];

const memory = () => {
  globalThis.gc?.();
  return process.memoryUsage();
};

/** Acquires until `count` are held or one fails (a peer may give up); the first failure. */
async function pool(count, concurrency, fn) {
  let next = 0;
  let failure;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count && !failure) {
        try {
          held.push(await fn(next++));
        } catch (err) {
          failure ??= err;
        }
      }
    }),
  );
  return failure;
}

serve(init, {
  hold: async ({ lib, count, concurrency }) => {
    const client = await init;
    // Warm both paths up (and open the watch) before the baseline reading.
    const warm =
      lib === 'leasehold' ? await client.acquire('warm') : raw.lock(`${config.etcd3Prefix}warm`);
    if (lib === 'leasehold') await warm.release();
    else await warm.acquire().then(() => warm.release());
    const before = memory();
    const t0 = now();
    const failure = await pool(count, concurrency, (i) =>
      lib === 'leasehold'
        ? client.acquire(`l${i}`, { value: 'x' })
        : raw.lock(`${config.etcd3Prefix}l${i}`).acquire(),
    );
    const seconds = (now() - t0) / 1000;
    const after = memory();
    return {
      seconds,
      held: held.length,
      failed: failure === undefined ? undefined : String(failure.message ?? failure),
      rssPerLock: (after.rss - before.rss) / held.length,
      heapPerLock: (after.heapUsed - before.heapUsed) / held.length,
    };
  },
  release: async ({ concurrency }) => {
    const all = held;
    held = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < all.length) await all[next++].release().catch(() => undefined);
      }),
    );
  },
  close: async () => {
    await (await init).close();
    raw.close();
  },
});
