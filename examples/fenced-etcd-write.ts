// Data kept in etcd itself, written only while the lock is held: the write and the check that
// this hold still owns its key are one etcd transaction.
import { connect, isLockLostError } from '@leasehold/core';

await using client = await connect({
  endpoints: process.env.ETCD_ENDPOINTS ?? 'http://127.0.0.1:2379',
  lockPrefix: process.env.LOCK_PREFIX ?? '/leasehold/lock/',
});
await using lock = await client.acquire('config', { timeoutMs: 10_000 });
try {
  const revision = await lock.put(process.env.CONFIG_KEY ?? '/app/config/feature-x', 'on');
  console.log(`config written at revision ${revision} by token ${lock.token}`);
} catch (err) {
  if (!isLockLostError(err)) throw err;
  console.error(`not written: ${err.message}`);
}
