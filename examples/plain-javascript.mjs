// The same lock from plain JavaScript on Node 20 or 22, where `await using` is not available
// without a compiler: close the client in `finally`.
import { connect, isLockTakenError } from '@leasehold/core';

const client = await connect({ endpoints: process.env.ETCD_ENDPOINTS ?? 'http://127.0.0.1:2379' });
try {
  const lock = await client.tryAcquire('nightly-report');
  try {
    console.log(`holding ${lock.key} with token ${lock.token}`);
    lock.onLost((err) => console.error(`lost: ${err.message}`));
    // ... work, passing lock.token to every write and checking lock.signal ...
  } finally {
    await lock.release();
  }
} catch (err) {
  if (!isLockTakenError(err)) throw err;
  console.log(`someone else runs it: ${err.holderKey} (token ${err.holderToken})`);
} finally {
  await client.close();
}
