// Uncontended acquire + release: leasehold against the raw etcd requests its algorithm needs
// (the join txn: create the key if absent and read the queue's keys; then the release: a delete
// guarded by the key's create revision), and against etcd3's own Lock. Optionally, Redis: a
// Redlock acquire + release against a raw SET NX PX + compare-and-delete script.
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { latencyRow, judged } from '../lib/rows.mjs';
import { interleave, percentile } from '../lib/stats.mjs';
import { etcd3Cycle, leaseholdCycle, rawLockCycle } from '../lib/raw-lock.mjs';
import { redisLock } from '../lib/redis-lock.mjs';

export const id = 'uncontended';
export const title = 'uncontended acquire + release';

export async function run(ctx) {
  const perRound = ctx.scale(60, 12);
  const rounds = ctx.scale(10, 5);
  const prefix = ctx.prefix('uncontended');
  const raw = new Etcd3({ hosts: ctx.endpoints });
  const client = await connect({ endpoints: ctx.endpoints, lockPrefix: `${prefix}leasehold/` });
  await client.sharedSession();
  const lease = raw.lease(30, { autoKeepAlive: true });
  const leaseId = await lease.grant();
  try {
    const ops = {
      raw: rawLockCycle(raw, `${prefix}raw/n/`, leaseId),
      leasehold: leaseholdCycle(client),
      etcd3: etcd3Cycle(raw, `${prefix}etcd3/n`),
    };
    const { samples } = await interleave(ops, { rounds, perRound, warmup: 30 });
    const base50 = percentile(samples.raw, 0.5);
    const base99 = percentile(samples.raw, 0.99);
    const p99ratio = percentile(samples.leasehold, 0.99) / base99;
    const leasehold = judged(
      latencyRow(id, 'leasehold acquire + release', samples.leasehold),
      percentile(samples.leasehold, 0.5) / base50,
      '≤1.05× p50, p99 ≤1.2×',
      1.05,
    );
    leasehold.ratioP99 = Math.round(p99ratio * 1000) / 1000;
    leasehold.met = leasehold.met && p99ratio <= 1.2;
    leasehold.note = `p99 ratio ${p99ratio.toFixed(2)}× (raw p99 ${base99.toFixed(2)} ms)`;
    const rows = [
      judged(
        latencyRow(id, 'raw join txn + guarded delete (baseline)', samples.raw),
        1,
        'baseline',
      ),
      leasehold,
      judged(
        latencyRow(id, 'etcd3 Lock acquire + release', samples.etcd3),
        percentile(samples.etcd3, 0.5) / base50,
        'peer',
      ),
    ];
    rows.push(...(await redisLock(ctx, { rounds, perRound })));
    return rows;
  } finally {
    await lease.revoke().catch(() => undefined);
    await client.close();
    raw.close();
  }
}
