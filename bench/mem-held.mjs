// Heap per held lock on one session: node --expose-gc bench/mem-held.mjs [locks]
import { connect } from '@leasehold/core';
import { startEtcd } from '@leasehold/testing';

const n = Number(process.argv[2] ?? 10_000);
const etcd = await startEtcd({ provider: 'binary' });
try {
  const client = await connect({ endpoints: etcd.endpoints, lockPrefix: '/mem/' });
  await client.sharedSession();
  for (let i = 0; i < 200; i++) await (await client.acquire(`warm-${i}`)).release();
  const heap = () => {
    globalThis.gc();
    globalThis.gc();
    return process.memoryUsage().heapUsed;
  };
  const before = heap();
  const locks = [];
  for (let i = 0; i < n; i += 100) {
    locks.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(100, n - i) }, (_, j) => client.acquire(`lock-${i + j}`)),
      )),
    );
  }
  const after = heap();
  console.log(`${n} held locks: ${((after - before) / n / 1024).toFixed(2)} KiB heap per lock`);
  await Promise.all(locks.map((l) => l.release()));
  await client.close();
} finally {
  await etcd.close();
}
