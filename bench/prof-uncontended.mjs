// Profiles the uncontended acquire + release cycle: node --cpu-prof bench/prof-uncontended.mjs
import { connect } from '@leasehold/core';
import { startEtcd } from '@leasehold/testing';

const cycles = Number(process.argv[2] ?? 3000);
const etcd = await startEtcd({ provider: 'binary' });
try {
  const client = await connect({ endpoints: etcd.endpoints, lockPrefix: '/prof/' });
  await client.sharedSession();
  for (let i = 0; i < 300; i++) await (await client.acquire('warm')).release();
  const t0 = performance.now();
  for (let i = 0; i < cycles; i++) {
    const lock = await client.acquire('job');
    await lock.release();
  }
  console.log(`${cycles} cycles in ${(performance.now() - t0).toFixed(0)} ms`);
  await client.close();
} finally {
  await etcd.close();
}
