// Claim overhead per fire: what @leasehold/cron spends in etcd for one fire (the claim txn, and
// the claim plus the record of how the run ended) against one raw create-if-absent txn.
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { leaseholdRunCoordinator } from '@leasehold/cron';
import { latencyRow, judged } from '../lib/rows.mjs';
import { interleave, now, percentile } from '../lib/stats.mjs';

export const id = 'cron';
export const title = 'cron: claim overhead per fire';

export async function run(ctx) {
  const prefix = ctx.prefix('cron');
  const raw = new Etcd3({ hosts: ctx.endpoints });
  const client = await connect({ endpoints: ctx.endpoints });
  await client.sharedSession();
  const lease = raw.lease(30);
  const leaseId = await lease.grant();
  const coordinator = leaseholdRunCoordinator(client, { prefix: `${prefix}claims/` });
  // A second replica on the same prefix: the one that finds a fire taken.
  const second = leaseholdRunCoordinator(client, { prefix: `${prefix}claims/` });
  const skipping = leaseholdRunCoordinator(client, { prefix: `${prefix}skip/`, overlap: 'skip' });
  // Every fire is a new one: fire i is i seconds after a fixed instant.
  const base = Date.parse('2030-01-01T00:00:00.000Z');
  let fire = 0;
  const nextKey = (task) => `${task}:${new Date(base + 1000 * fire++).toISOString()}`;
  try {
    const { samples } = await interleave(
      {
        raw: async () => {
          const key = Buffer.from(`${prefix}raw/${fire++}`);
          await raw.kv.txn({
            compare: [{ key, target: 'Create', result: 'Equal', create_revision: '0' }],
            success: [{ request_put: { key, value: Buffer.from('x'), lease: leaseId } }],
            failure: [{ request_range: { key } }],
          });
        },
        claim: async () => {
          if (!(await coordinator.shouldRun(nextKey('claim-only'), 30_000)))
            throw new Error('lost');
        },
        claimRecord: async () => {
          const key = nextKey('claim-record');
          if (!(await coordinator.shouldRun(key, 30_000))) throw new Error('lost');
          await coordinator.onComplete(key);
        },
        claimRecordSkip: async () => {
          const key = nextKey('claim-record-skip');
          if (!(await skipping.shouldRun(key, 30_000))) throw new Error('lost');
          await skipping.onComplete(key);
        },
        // Timed from the second claim only.
        taken: async () => {
          const key = nextKey('taken');
          await coordinator.shouldRun(key, 30_000);
          const t0 = now();
          if (await second.shouldRun(key, 30_000)) throw new Error('claimed twice');
          return now() - t0;
        },
      },
      { rounds: ctx.scale(5, 3), perRound: ctx.scale(60, 10), warmup: 20 },
    );
    const p50 = percentile(samples.raw, 0.5);
    const row = (key, name, target = 'report', limit = undefined) =>
      judged(
        latencyRow(id, name, samples[key]),
        percentile(samples[key], 0.5) / p50,
        target,
        limit,
      );
    return [
      judged(latencyRow(id, 'raw create-if-absent txn (baseline)', samples.raw), 1, 'baseline'),
      row('claim', 'claim (shouldRun)'),
      row('claimRecord', 'claim + record (shouldRun + onComplete)', '≤2.2× (two writes: 2×)', 2.2),
      row('claimRecordSkip', "claim + record, overlap 'skip'"),
      row('taken', 'claim found taken (a losing replica)'),
    ];
  } finally {
    await lease.revoke().catch(() => undefined);
    await client.close();
    raw.close();
  }
}
