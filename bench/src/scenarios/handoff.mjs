// Handoff between processes: the time from the holder's release() call to the waiter's acquire()
// resolving in another process, against the watch floor measured the same way in the same run
// (a raw delete, until a watch in the other process sees its event). Timestamps on both sides
// are performance.timeOrigin + performance.now(): one host, one clock.
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { latencyRow, judged } from '../lib/rows.mjs';
import { interleave, now, percentile, until } from '../lib/stats.mjs';
import { startWorker } from '../lib/workers.mjs';

export const id = 'handoff';
export const title = 'handoff, 1 holder → 1 waiter in another process';

/** One floor probe: put, wait until the peer's watch has it, delete; ms until it saw the delete. */
export async function floorProbe(raw, peer, key) {
  await raw.put(key).value('x');
  await peer.request('seenPut', { key });
  const t0 = now();
  await raw.delete().key(key);
  return (await peer.request('seenDelete', { key })) - t0;
}

export async function run(ctx) {
  const prefix = ctx.prefix('handoff');
  const lockPrefix = `${prefix}lock/`;
  const floorPrefix = `${prefix}floor/`;
  const raw = new Etcd3({ hosts: ctx.endpoints });
  const client = await connect({ endpoints: ctx.endpoints, lockPrefix });
  const peer = await startWorker('peer', { endpoints: ctx.endpoints, lockPrefix, floorPrefix });
  try {
    let probe = 0;
    const ops = {
      floor: () => floorProbe(raw, peer, `${floorPrefix}${probe++}`),
      leasehold: async () => {
        const lock = await client.acquire('h', { value: 'holder' });
        const acquired = peer.request('acquire', { name: 'h' });
        await until(async () => (await raw.getAll().prefix(`${lockPrefix}h/`).count()) >= 2, {
          what: "the peer's waiter key",
        });
        const t0 = now();
        await lock.release();
        const at = await acquired;
        await peer.request('release', { name: 'h' });
        return at - t0;
      },
    };
    const { samples } = await interleave(ops, {
      rounds: ctx.scale(10, 4),
      perRound: ctx.scale(20, 6),
      warmup: 10,
    });
    const floor = percentile(samples.floor, 0.5);
    return [
      judged(
        latencyRow(id, 'watch floor: delete → event in another process', samples.floor),
        1,
        'baseline',
      ),
      judged(
        latencyRow(id, 'leasehold release → acquire in another process', samples.leasehold),
        percentile(samples.leasehold, 0.5) / floor,
        '≤1.2× floor (p50)',
        1.2,
      ),
    ];
  } finally {
    await peer.close();
    await client.close();
    raw.close();
  }
}
