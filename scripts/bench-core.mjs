// Uncontended lock cost: leasehold acquire+release vs the raw etcd transactions the algorithm
// needs (one acquire txn, one guarded delete txn), and vs etcd3's own Lock, in one run against
// the same etcd. Ratios, not absolute times, are the claim. Not part of the test suite.
//
//   pnpm build && node scripts/bench-core.mjs [--n 300]
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(new URL('../integration/package.json', import.meta.url));
const { Etcd3 } = require('etcd3');
const core = await import(new URL('../packages/core/dist/index.js', import.meta.url).href);
const testing = await import(new URL('../packages/testing/dist/index.js', import.meta.url).href);

const { values: args } = parseArgs({ options: { n: { type: 'string', default: '300' } } });
const N = Number(args.n);
const ROUNDS = 5;

const etcd = await testing.startEtcd();
const endpoints = etcd.endpoints;
const raw = new Etcd3({ hosts: endpoints });
const client = await core.connect({ endpoints, lockPrefix: '/bench/leasehold/' });
const session = await client.sharedSession();
const lease = raw.lease(10);
const leaseId = await lease.grant();

const ops = {
  'raw txns (acquire txn + guarded delete)': async (i) => {
    const key = Buffer.from(`/bench/raw/n/${i}`);
    const prefix = Buffer.from('/bench/raw/n/');
    const res = await raw.kv.txn({
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: '0' }],
      success: [
        { request_put: { key, value: Buffer.alloc(0), lease: leaseId } },
        {
          request_range: {
            key: prefix,
            range_end: Buffer.from('/bench/raw/n0'),
            sort_order: 'Ascend',
            sort_target: 'Create',
            limit: 1,
          },
        },
      ],
      failure: [{ request_range: { key } }],
    });
    await raw.kv.txn({
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: res.header.revision }],
      success: [{ request_delete_range: { key } }],
      failure: [],
    });
  },
  'leasehold acquire + release': async () => {
    const lock = await client.acquire('n');
    await lock.release();
  },
  'etcd3 Lock acquire + release': async () => {
    const lock = raw.lock('/bench/etcd3/n');
    await lock.acquire();
    await lock.release();
  },
};

for (const op of Object.values(ops)) for (let i = 0; i < 30; i++) await op(i); // warm-up
const totals = Object.fromEntries(Object.keys(ops).map((k) => [k, 0]));
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, op] of Object.entries(ops)) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < N / ROUNDS; i++) await op(i);
    totals[name] += Number(process.hrtime.bigint() - start) / 1e6;
  }
}
const baseline = totals['raw txns (acquire txn + guarded delete)'] / N;
console.log(`uncontended lock, ${N} iterations each, etcd ${etcd.provider}`);
for (const [name, ms] of Object.entries(totals)) {
  const per = ms / N;
  console.log(
    `  ${name.padEnd(42)} ${per.toFixed(2)} ms/op   ratio ${(per / baseline).toFixed(2)}`,
  );
}
await lease.revoke().catch(() => undefined);
await session.close();
await client.close();
raw.close();
await etcd.close();
