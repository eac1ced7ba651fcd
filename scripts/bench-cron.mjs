// Claim overhead per fire: what @leasehold/cron spends in etcd for one fire (the claim
// transaction, and the claim plus the record of how the run ended) against one raw
// create-if-absent transaction, in one run against the same etcd. Ratios, not absolute times,
// are the claim. Not part of the test suite.
//
//   pnpm build && node scripts/bench-cron.mjs [--n 300]
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(new URL('../integration/package.json', import.meta.url));
const { Etcd3 } = require('etcd3');
const core = await import(new URL('../packages/core/dist/index.js', import.meta.url).href);
const cron = await import(new URL('../packages/cron/dist/index.js', import.meta.url).href);
const testing = await import(new URL('../packages/testing/dist/index.js', import.meta.url).href);

const { values: args } = parseArgs({ options: { n: { type: 'string', default: '300' } } });
const N = Number(args.n);
const ROUNDS = 5;

const etcd = await testing.startEtcd();
const endpoints = etcd.endpoints;
const raw = new Etcd3({ hosts: endpoints });
const client = await core.connect({ endpoints });
await client.sharedSession();
const lease = raw.lease(10);
const leaseId = await lease.grant();
const coordinator = cron.leaseholdRunCoordinator(client, { prefix: '/bench/cron/' });
// A second replica on the same prefix: the one that finds a fire taken.
const second = cron.leaseholdRunCoordinator(client, { prefix: '/bench/cron/' });
const skipping = cron.leaseholdRunCoordinator(client, {
  prefix: '/bench/cron-skip/',
  overlap: 'skip',
});

// Every fire is a new one: fire i is i seconds after a fixed instant.
const base = Date.parse('2030-01-01T00:00:00.000Z');
let fire = 0;
const nextKey = (task) => `${task}:${new Date(base + 1000 * fire++).toISOString()}`;

const ops = {
  'raw create-if-absent txn': async () => {
    const key = Buffer.from(`/bench/raw/${fire++}`);
    await raw.kv.txn({
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: '0' }],
      success: [{ request_put: { key, value: Buffer.from('x'), lease: leaseId } }],
      failure: [{ request_range: { key } }],
    });
  },
  'claim (shouldRun)': async () => {
    if (!(await coordinator.shouldRun(nextKey('claim-only'), 30_000))) throw new Error('lost');
  },
  'claim + record (shouldRun + onComplete)': async () => {
    const key = nextKey('claim-record');
    if (!(await coordinator.shouldRun(key, 30_000))) throw new Error('lost');
    await coordinator.onComplete(key);
  },
  "claim + record, overlap 'skip'": async () => {
    const key = nextKey('claim-record-skip');
    if (!(await skipping.shouldRun(key, 30_000))) throw new Error('lost');
    await skipping.onComplete(key);
  },
  // Timed from the second claim only (the op returns its own duration).
  'claim found taken (a losing replica)': async () => {
    const key = nextKey('taken');
    await coordinator.shouldRun(key, 30_000);
    const t0 = process.hrtime.bigint();
    if (await second.shouldRun(key, 30_000)) throw new Error('claimed twice');
    return Number(process.hrtime.bigint() - t0) / 1e6;
  },
};

for (const op of Object.values(ops)) for (let i = 0; i < 30; i++) await op(); // warm-up
const totals = Object.fromEntries(Object.keys(ops).map((k) => [k, 0]));
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, op] of Object.entries(ops)) {
    for (let i = 0; i < N / ROUNDS; i++) {
      const start = process.hrtime.bigint();
      const measured = await op();
      totals[name] +=
        typeof measured === 'number' ? measured : Number(process.hrtime.bigint() - start) / 1e6;
    }
  }
}
const baseline = totals['raw create-if-absent txn'] / N;
console.log(`claim overhead per fire, ${N} fires each, etcd ${etcd.provider}`);
for (const [name, ms] of Object.entries(totals)) {
  const per = ms / N;
  console.log(
    `  ${name.padEnd(42)} ${per.toFixed(2)} ms/fire   ratio ${(per / baseline).toFixed(2)}`,
  );
}
await lease.revoke().catch(() => undefined);
await client.close();
raw.close();
await etcd.close();
