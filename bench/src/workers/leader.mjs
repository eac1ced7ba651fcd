// A process that campaigns and leads until it is killed.
import { connect } from '@leasehold/core';
import { serve, workerConfig } from '../lib/workers.mjs';

const config = workerConfig();
const init = connect({ endpoints: config.endpoints, electionPrefix: config.electionPrefix });

serve(init, {
  campaign: async ({ name, ttlSeconds }) => {
    const client = await init;
    const session = await client.session({ ttlSeconds });
    await client.campaign(name, `pid ${process.pid}`, { session });
    return true;
  },
  close: async () => (await init).close(),
});
