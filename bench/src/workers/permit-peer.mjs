// A process on the other side of a handoff that waits for a lock or a permit, stamping when it
// gets it with the host's shared clock.
import { connect } from '@leasehold/core';
import { now } from '../lib/stats.mjs';
import { serve, workerConfig } from '../lib/workers.mjs';

const config = workerConfig();
const held = new Map();
const init = (async () => {
  const client = await connect({ endpoints: config.endpoints, lockPrefix: config.lockPrefix });
  await client.sharedSession();
  return { client };
})();

serve(init, {
  acquire: async ({ name, permits }) => {
    const { client } = await init;
    const hold =
      permits === undefined
        ? await client.acquire(name, { value: 'peer' })
        : await client.acquirePermit(name, { permits, value: 'peer' });
    const at = now();
    held.set(name, hold);
    return at;
  },
  release: async ({ name }) => {
    await held.get(name)?.release();
    held.delete(name);
  },
});
