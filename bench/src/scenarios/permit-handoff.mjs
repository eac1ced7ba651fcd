// Permit handoff against lock handoff between processes, interleaved round by round: the time
// from the holder's release() call to the waiter's acquire resolving in another process. The
// semaphore has 2 permits, both held here, so the waiter gets the slot one release frees while
// the other stays held; a permit's handoff adds its slot's claim (one txn) to the lock's.
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { latencyRow, judged } from '../lib/rows.mjs';
import { interleave, now, percentile, until } from '../lib/stats.mjs';
import { startWorker } from '../lib/workers.mjs';

export const id = 'permit-handoff';
export const title = 'permit handoff vs lock handoff, 1 holder → 1 waiter in another process';

export async function run(ctx) {
  const lockPrefix = `${ctx.prefix('permit-handoff')}lock/`;
  const raw = new Etcd3({ hosts: ctx.endpoints });
  const client = await connect({ endpoints: ctx.endpoints, lockPrefix });
  const peer = await startWorker('permit-peer', { endpoints: ctx.endpoints, lockPrefix });
  const queued = (range, n) =>
    until(async () => (await raw.getAll().prefix(range).count()) >= n, {
      what: `${n} keys in ${range}`,
    });
  try {
    // Holds `holders` (a lock, or both permits) with `take`, queues the peer, then measures
    // from one release to the peer's acquire.
    const handoff = async (name, take, holders, peerArgs, range) => {
      const held = [];
      for (let i = 0; i < holders; i++) held.push(await take());
      const acquired = peer.request('acquire', { name, ...peerArgs });
      await queued(range, holders + 1);
      const t0 = now();
      await held[0].release();
      const at = await acquired;
      for (const h of held.slice(1)) await h.release();
      await peer.request('release', { name });
      return at - t0;
    };
    const ops = {
      lock: () => handoff('h', () => client.acquire('h'), 1, {}, `${lockPrefix}h/`),
      permit: () =>
        handoff(
          'p',
          () => client.acquirePermit('p', { permits: 2 }),
          2,
          { permits: 2 },
          `${lockPrefix}p%sem/`,
        ),
    };
    const { samples } = await interleave(ops, {
      rounds: ctx.scale(10, 4),
      perRound: ctx.scale(20, 6),
      warmup: 10,
    });
    const lock = percentile(samples.lock, 0.5);
    return [
      judged(
        latencyRow(id, 'lock release → acquire in another process', samples.lock),
        1,
        'baseline',
      ),
      judged(
        latencyRow(id, 'permit release → acquirePermit in another process', samples.permit),
        percentile(samples.permit, 0.5) / lock,
        'reported (p50 vs the lock’s)',
      ),
    ];
  } finally {
    await peer.close();
    await client.close();
    raw.close();
  }
}
