// Elections. Graceful hand-over: from a leader's resign() call until the next candidate, already
// waiting on another connection, is told it leads; leasehold against etcd3's Election,
// interleaved. Failover: a leader process is SIGKILLed; the time until a waiting candidate in
// this process leads, against the lease TTL (the bound: the lease must expire first).
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { latencyRow, judged } from '../lib/rows.mjs';
import { interleave, now, percentile, until } from '../lib/stats.mjs';
import { startWorker } from '../lib/workers.mjs';

export const id = 'election';
export const title = 'election: graceful resign → new leader, SIGKILL failover';

const FAILOVER_TTL_SECONDS = 2;
/** etcd checks for expired leases every 500 ms. */
const EXPIRY_TICK_MS = 500;

export async function run(ctx) {
  const prefix = ctx.prefix('election');
  const raw = new Etcd3({ hosts: ctx.endpoints });
  const queued = (keys, count) =>
    until(async () => (await raw.getAll().prefix(keys).count()) >= count, {
      what: `${count} candidates`,
      everyMs: 0,
    });
  const electionPrefix = `${prefix}leasehold/`;
  const opts = { endpoints: ctx.endpoints, electionPrefix };
  const [a, b] = [await connect(opts), await connect(opts)];
  const [ea, eb] = [new Etcd3({ hosts: ctx.endpoints }), new Etcd3({ hosts: ctx.endpoints })];
  const etcd3Name = `${prefix}etcd3/e`;
  const rows = [];
  try {
    let leader = await a.campaign('e', 'a');
    let [me, other] = [b, a];
    let etcd3Leader = ea.election(etcd3Name, 10).campaign('a');
    await etcd3Leader.wait();
    let [etcd3Me, etcd3Other] = [eb, ea];
    const { samples } = await interleave(
      {
        etcd3: async (i) => {
          const next = etcd3Me.election(etcd3Name, 10).campaign(i % 2 ? 'a' : 'b');
          next.on('error', () => undefined);
          await queued(`election/${etcd3Name}/`, 2); // etcd3 puts its own prefix first
          const start = now();
          void etcd3Leader.resign();
          await next.wait();
          const ms = now() - start;
          etcd3Leader = next;
          [etcd3Me, etcd3Other] = [etcd3Other, etcd3Me];
          return ms;
        },
        leasehold: async (i) => {
          const next = me.campaign('e', i % 2 ? 'a' : 'b');
          await queued(`${electionPrefix}e/`, 2);
          const start = now();
          void leader.resign();
          leader = await next;
          const ms = now() - start;
          [me, other] = [other, me];
          return ms;
        },
      },
      { rounds: ctx.scale(5, 3), perRound: ctx.scale(20, 5), warmup: 5 },
    );
    await leader.resign();
    await etcd3Leader.resign();
    const base = percentile(samples.etcd3, 0.5);
    rows.push(
      judged(latencyRow(id, 'etcd3 Election: resign → next leader', samples.etcd3), 1, 'baseline'),
      judged(
        latencyRow(id, 'leasehold: resign → next leader', samples.leasehold),
        percentile(samples.leasehold, 0.5) / base,
        '≤1× etcd3 (p50)',
        1,
      ),
    );
    // Failover after SIGKILL.
    const trials = ctx.scale(3, 1);
    const failovers = [];
    for (let t = 0; t < trials; t++) {
      const worker = await startWorker('leader', opts);
      try {
        await worker.request('campaign', { name: 'k', ttlSeconds: FAILOVER_TTL_SECONDS });
        const next = a.campaign('k', 'survivor');
        await queued(`${electionPrefix}k/`, 2);
        const t0 = now();
        await worker.kill('SIGKILL');
        const leadership = await next;
        failovers.push(now() - t0);
        await leadership.resign();
      } finally {
        await worker.kill();
      }
    }
    const ttlMs = FAILOVER_TTL_SECONDS * 1000;
    const worst = Math.max(...failovers);
    rows.push({
      ...latencyRow(id, `SIGKILLed leader → new leader (TTL ${FAILOVER_TTL_SECONDS} s)`, failovers),
      ratio: Math.round((percentile(failovers, 0.5) / ttlMs) * 1000) / 1000,
      target: `≤ TTL + ${EXPIRY_TICK_MS} ms expiry tick`,
      met: worst <= ttlMs + EXPIRY_TICK_MS,
      note: `ratio is to the TTL; worst ${worst.toFixed(0)} ms`,
    });
    return rows;
  } finally {
    await Promise.all([a.close(), b.close()]);
    ea.close();
    eb.close();
    raw.close();
  }
}
