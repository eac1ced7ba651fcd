// 10,000 locks held at once by one process (16 acquires in flight): leasehold on its one shared
// session against etcd3's Lock (a lease, and a keepalive, per lock). Acquires per second, the
// keepalive streams etcd saw opened, etcd's CPU while acquiring and while just holding, and the
// client's memory per held lock (RSS and heap, after a full GC, before and after).
import { cpuPercent, scrape, streamsStarted, sum } from '../lib/metrics.mjs';
import { judged } from '../lib/rows.mjs';
import { sleep } from '../lib/stats.mjs';
import { startWorker } from '../lib/workers.mjs';

export const id = 'many-locks';
export const title = 'many locks on one session (10,000; --locks N), and memory per held lock';

const CONCURRENCY = 16;

async function measure(ctx, lib, count, prefix) {
  const before = await scrape(ctx.endpoints);
  const worker = await startWorker(
    'hold-many',
    { endpoints: ctx.endpoints, lockPrefix: `${prefix}lock/`, etcd3Prefix: `${prefix}etcd3/` },
    { execArgv: ['--expose-gc'] },
  );
  try {
    const res = await worker.request('hold', { lib, count, concurrency: CONCURRENCY });
    const acquired = await scrape(ctx.endpoints);
    await sleep(ctx.scale(10_000, 2_000));
    const holding = await scrape(ctx.endpoints);
    await worker.request('release', { concurrency: CONCURRENCY });
    const keepalives = (s) =>
      sum(s, 'grpc_server_msg_received_total', { grpc_method: 'LeaseKeepAlive' });
    const out = {
      ...res,
      acquiresPerSec: res.held / res.seconds,
      streams: streamsStarted(before, holding, 'LeaseKeepAlive'),
      cpuAcquiring: cpuPercent(before, acquired),
      cpuHolding: cpuPercent(acquired, holding),
      keepalivesPerSec:
        (keepalives(holding) - keepalives(acquired)) / ((holding.at - acquired.at) / 1000),
    };
    ctx.log(`  ${lib}: ${JSON.stringify(out)}`);
    return out;
  } finally {
    await worker.close();
  }
}

export async function run(ctx) {
  // `--locks 100000` holds that many with leasehold; etcd3, a lease and a stream per lock, is
  // measured at most at 10,000 (its acquire rate and memory per lock are the baseline).
  const count = ctx.locks ?? ctx.scale(10_000, 300);
  const baseline = Math.min(count, ctx.scale(10_000, 300));
  const prefix = ctx.prefix('many');
  const leasehold = await measure(ctx, 'leasehold', count, prefix);
  const etcd3 = await measure(ctx, 'etcd3', baseline, prefix);
  const failed = (m) =>
    m.failed ? { note: `gave up after ${m.held} of ${count} locks: ${m.failed}` } : {};
  const row = (name, m, extra) => ({
    ...failed(m),
    scenario: id,
    name,
    n: m.held,
    opsPerSec: Math.round(m.acquiresPerSec),
    value: `${m.streams} keepalive streams, ${m.keepalivesPerSec.toFixed(0)} keepalives/s; etcd CPU ${m.cpuAcquiring.toFixed(0)}% acquiring, ${m.cpuHolding.toFixed(1)}% holding`,
    ...extra,
  });
  const mem = (name, m) => ({
    scenario: 'memory',
    name,
    n: m.held,
    value: `${(m.rssPerLock / 1024).toFixed(2)} KiB RSS, ${(m.heapPerLock / 1024).toFixed(2)} KiB heap per lock`,
    rssBytesPerLock: Math.round(m.rssPerLock),
    heapBytesPerLock: Math.round(m.heapPerLock),
  });
  return [
    judged(row(`${baseline} locks: etcd3 Lock (a lease each)`, etcd3), 1, 'baseline'),
    judged(
      row(`${count} locks on one leasehold session`, leasehold),
      leasehold.acquiresPerSec / etcd3.acquiresPerSec,
      '≥3× etcd3 acquires/s, 1 stream, etcd ≤5% CPU holding',
      3,
      { atLeast: true },
    ),
    judged(mem('client memory per held lock: etcd3 Lock', etcd3), 1, 'baseline'),
    {
      ...judged(
        mem('client memory per held lock: leasehold', leasehold),
        leasehold.heapPerLock / etcd3.heapPerLock,
        '≤2 KiB heap per lock',
      ),
      met: leasehold.heapPerLock <= 2048,
    },
  ].map((r) =>
    r.name.includes('leasehold session')
      ? {
          ...r,
          met: r.met && leasehold.streams <= 1 && !leasehold.failed && leasehold.cpuHolding <= 5,
        }
      : r,
  );
}
