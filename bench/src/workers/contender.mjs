// A process with `contenders` concurrent contenders for one lock, each on a session of its own
// (leasehold) or its own Lock (etcd3, polling every `pollMs` while taken). Each cycle stamps the
// moment it held the lock and the moment it called release; the parent strings them together.
// Also hosts a floor watch, so the floor is measured in a process under the same load.
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { floorHandlers, floorWatch } from '../lib/floor-watch.mjs';
import { now, sleep } from '../lib/stats.mjs';
import { serve, workerConfig } from '../lib/workers.mjs';

const config = workerConfig();
const raw = new Etcd3({ hosts: config.endpoints });
const init = (async () => {
  const client = await connect({ endpoints: config.endpoints, lockPrefix: config.lockPrefix });
  const sessions = [];
  for (let i = 0; i < config.contenders; i++) sessions.push(await client.session());
  return { client, sessions, floor: await floorWatch(raw, config.floorPrefix) };
})();

const libraries = {
  async leasehold(session, name) {
    const lock = await (await init).client.acquire(name, { session, value: 'contender' });
    const held = now();
    const released = now();
    await lock.release();
    return [held, released];
  },
  async etcd3(_session, name) {
    for (;;) {
      const lock = raw.lock(`${config.etcd3Prefix}${name}`);
      try {
        await lock.acquire();
      } catch (err) {
        if (err?.constructor?.name !== 'EtcdLockFailedError') throw err;
        await sleep(config.pollMs);
        continue;
      }
      const held = now();
      const released = now();
      await lock.release();
      return [held, released];
    }
  },
};

serve(init, {
  /** Contends until `durationMs` has passed; every cycle's [held, release called] stamps. */
  run: async ({ lib, name, durationMs }) => {
    const { sessions } = await init;
    const cycle = libraries[lib];
    const deadline = now() + durationMs;
    const cycles = [];
    await Promise.all(
      sessions.map(async (session) => {
        while (now() < deadline) cycles.push(await cycle(session, name));
      }),
    );
    return cycles;
  },
  ...floorHandlers(init, raw),
});
