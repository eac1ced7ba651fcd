// RPCs per uncontended lock cycle, counted by etcd itself (/metrics, summed over members): unary
// calls handled, plus messages received on streams (watch requests, keepalives), per cycle.
// Each library runs alone while counted, so the deltas are its own.
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { rpcDelta, scrape } from '../lib/metrics.mjs';
import { judged } from '../lib/rows.mjs';
import { now } from '../lib/stats.mjs';
import { etcd3Cycle, leaseholdCycle, rawLockCycle } from '../lib/raw-lock.mjs';

export const id = 'rpcs';
export const title = 'RPCs per lock cycle (etcd /metrics)';

const describe = (perCycle) =>
  Object.entries(perCycle)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([m, v]) => `${m} ${v.toFixed(2)}`)
    .join(', ');

/** Runs `cycle` n times after a warm-up; etcd's RPC counts per cycle and the cycles per second. */
async function count(ctx, n, cycle) {
  for (let i = 0; i < 20; i++) await cycle(i);
  const before = await scrape(ctx.endpoints);
  const t0 = now();
  for (let i = 0; i < n; i++) await cycle(i);
  const seconds = (now() - t0) / 1000;
  const after = await scrape(ctx.endpoints);
  const perCycle = Object.fromEntries(
    Object.entries(rpcDelta(before, after)).map(([m, v]) => [m, v / n]),
  );
  // Keepalives are per session and per second, not per cycle: kept apart from the total.
  const requests = Object.entries(perCycle)
    .filter(([m]) => m !== 'LeaseKeepAlive')
    .reduce((a, [, v]) => a + v, 0);
  return { perCycle, requests, opsPerSec: n / seconds };
}

export async function run(ctx) {
  const n = ctx.scale(500, 50);
  const prefix = ctx.prefix('rpcs');
  const raw = new Etcd3({ hosts: ctx.endpoints });
  const lease = raw.lease(30);
  const leaseId = await lease.grant();
  const client = await connect({ endpoints: ctx.endpoints, lockPrefix: `${prefix}leasehold/` });
  await client.sharedSession();
  try {
    const rawCount = await count(ctx, n, rawLockCycle(raw, `${prefix}raw/n/`, leaseId));
    const leaseholdCount = await count(ctx, n, leaseholdCycle(client));
    const etcd3Count = await count(ctx, n, etcd3Cycle(raw, `${prefix}etcd3/n`));
    const row = (name, c, extra) => ({
      scenario: id,
      name,
      n,
      opsPerSec: Math.round(c.opsPerSec),
      value: `${c.requests.toFixed(2)} RPCs/cycle`,
      note: `per cycle: ${describe(c.perCycle)}`,
      rpcsPerCycle: c.perCycle,
      ...extra,
    });
    return [
      judged(row('raw join txn + guarded delete: RPCs/cycle (baseline)', rawCount), 1, 'baseline'),
      judged(
        row('leasehold acquire + release: RPCs/cycle', leaseholdCount),
        leaseholdCount.requests / rawCount.requests,
        '≤1.05× raw',
        1.05,
      ),
      judged(
        row('etcd3 Lock acquire + release: RPCs/cycle', etcd3Count),
        etcd3Count.requests / rawCount.requests,
        'peer',
      ),
    ];
  } finally {
    await lease.revoke().catch(() => undefined);
    await client.close();
    raw.close();
  }
}
