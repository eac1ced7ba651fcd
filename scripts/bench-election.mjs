// Graceful hand-over: the time from a leader's resign() call until the next candidate, already
// waiting on another connection, is told it leads. leasehold vs etcd3's Election, in one run
// against the same etcd; p50 and p90 per library and the ratio of the p50s. Not part of the test
// suite.
//
//   pnpm build && node scripts/bench-election.mjs [--n 100]
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

const require = createRequire(new URL('../integration/package.json', import.meta.url));
const { Etcd3 } = require('etcd3');
const core = await import(new URL('../packages/core/dist/index.js', import.meta.url).href);
const testing = await import(new URL('../packages/testing/dist/index.js', import.meta.url).href);

const { values: args } = parseArgs({ options: { n: { type: 'string', default: '100' } } });
const N = Number(args.n);

const etcd = await testing.startEtcd();
const endpoints = etcd.endpoints;
const raw = new Etcd3({ hosts: endpoints });

/** Resolves once `count` candidates are queued under `prefix` (so the next one is waiting). */
async function queued(prefix, count) {
  for (;;) {
    const n = await raw.getAll().prefix(prefix).count();
    if (n >= count) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

async function leasehold() {
  const opts = { endpoints, electionPrefix: '/bench/leasehold-e/' };
  const [a, b] = [await core.connect(opts), await core.connect(opts)];
  const times = [];
  let leader = await a.campaign('e', 'a');
  let [me, other] = [b, a];
  for (let i = 0; i < N + 10; i++) {
    const next = me.campaign('e', i % 2 ? 'a' : 'b');
    await queued('/bench/leasehold-e/e/', 2);
    const start = process.hrtime.bigint();
    void leader.resign();
    leader = await next;
    if (i >= 10) times.push(Number(process.hrtime.bigint() - start) / 1e6);
    [me, other] = [other, me];
  }
  await leader.resign();
  await Promise.all([a.close(), b.close()]);
  return times;
}

async function etcd3Election() {
  const [a, b] = [new Etcd3({ hosts: endpoints }), new Etcd3({ hosts: endpoints })];
  const times = [];
  let leader = a.election('/bench/etcd3-e/e', 10).campaign('a');
  await leader.wait();
  let [me, other] = [b, a];
  for (let i = 0; i < N + 10; i++) {
    const next = me.election('/bench/etcd3-e/e', 10).campaign(i % 2 ? 'a' : 'b');
    next.on('error', () => undefined);
    await queued('election//bench/etcd3-e/e/', 2); // etcd3 puts its own prefix before the name
    const start = process.hrtime.bigint();
    void leader.resign();
    await next.wait();
    leader = next;
    if (i >= 10) times.push(Number(process.hrtime.bigint() - start) / 1e6);
    [me, other] = [other, me];
  }
  await leader.resign();
  a.close();
  b.close();
  return times;
}

const pct = (xs, p) => [...xs].sort((x, y) => x - y)[Math.floor((xs.length - 1) * p)];
const results = { leasehold: await leasehold(), 'etcd3 Election': await etcd3Election() };
console.log(`graceful resign → next leader, ${N} hand-overs each, etcd ${etcd.provider}`);
const base = pct(results['etcd3 Election'], 0.5);
for (const [name, times] of Object.entries(results)) {
  const p50 = pct(times, 0.5);
  console.log(
    `  ${name.padEnd(16)} p50 ${p50.toFixed(2)} ms   p90 ${pct(times, 0.9).toFixed(2)} ms   p50 ratio to etcd3 ${(p50 / base).toFixed(2)}`,
  );
}
raw.close();
await etcd.close();
