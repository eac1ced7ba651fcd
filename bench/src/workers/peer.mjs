// A process on the other side of a handoff: waits for a lock and watches a prefix for the watch
// floor, stamping when each arrives with the host's shared clock.
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { floorHandlers, floorWatch } from '../lib/floor-watch.mjs';
import { now } from '../lib/stats.mjs';
import { serve, workerConfig } from '../lib/workers.mjs';

const config = workerConfig();
const held = new Map();
const raw = new Etcd3({ hosts: config.endpoints });
const init = (async () => {
  const client = await connect({ endpoints: config.endpoints, lockPrefix: config.lockPrefix });
  await client.sharedSession();
  return { client, floor: await floorWatch(raw, config.floorPrefix) };
})();

serve(init, {
  acquire: async ({ name }) => {
    const lock = await (await init).client.acquire(name, { value: 'peer' });
    const at = now();
    held.set(name, lock);
    return at;
  },
  release: async ({ name }) => {
    await held.get(name)?.release();
    held.delete(name);
  },
  ...floorHandlers(init, raw),
});
