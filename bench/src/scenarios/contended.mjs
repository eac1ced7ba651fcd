// 8 contenders in 4 processes on one lock, holding it for no time: handoff latency (release()
// called → the next holder's acquire resolved, across processes) and cycles per second, for
// leasehold and for etcd3's Lock retried every 5 ms, phases interleaved. The watch floor is
// probed during the leasehold phases, in one of the contending processes: the floor under the
// same load.
import { Etcd3 } from 'etcd3';
import { latencyRow, judged } from '../lib/rows.mjs';
import { now, percentile } from '../lib/stats.mjs';
import { startWorker } from '../lib/workers.mjs';
import { floorProbe } from './handoff.mjs';

export const id = 'contended';
export const title = 'handoff and throughput, 8 contenders in 4 processes';

const PROCESSES = 4;
const PER_PROCESS = 2;
const POLL_MS = 5;

/** Handoff gaps and the cycle rate from every process's [held, release called] stamps. */
function stringTogether(cycles) {
  cycles.sort((a, b) => a[0] - b[0]);
  const gaps = [];
  for (let i = 1; i < cycles.length; i++) gaps.push(cycles[i][0] - cycles[i - 1][1]);
  const span = (cycles.at(-1)[1] - cycles[0][0]) / 1000;
  return { gaps, cycles: cycles.length, seconds: span };
}

export async function run(ctx) {
  const prefix = ctx.prefix('contended');
  const config = {
    endpoints: ctx.endpoints,
    lockPrefix: `${prefix}lock/`,
    etcd3Prefix: `${prefix}etcd3/`,
    floorPrefix: `${prefix}floor/`,
    contenders: PER_PROCESS,
    pollMs: POLL_MS,
  };
  const raw = new Etcd3({ hosts: ctx.endpoints });
  const workers = await Promise.all(
    Array.from({ length: PROCESSES }, () => startWorker('contender', config)),
  );
  const rounds = ctx.scale(3, 2);
  const phaseMs = ctx.scale(4_000, 1_500);
  const results = {
    leasehold: { gaps: [], cycles: 0, seconds: 0 },
    etcd3: { gaps: [], cycles: 0, seconds: 0 },
  };
  const floor = [];
  let probe = 0;
  try {
    const phase = async (lib, durationMs, { probes }) => {
      const running = Promise.all(
        workers.map((w) => w.request('run', { lib, name: 'c', durationMs })),
      );
      let done = false;
      const probing = (async () => {
        while (probes && !done)
          floor.push(await floorProbe(raw, workers[0], `${config.floorPrefix}${probe++}`));
      })();
      const cycles = (await running).flat();
      done = true;
      await probing;
      return stringTogether(cycles);
    };
    await phase('leasehold', 500, { probes: false }); // warm-up: sessions, watches, JIT
    await phase('etcd3', 500, { probes: false });
    for (let r = 0; r < rounds; r++) {
      for (const lib of r % 2 ? ['etcd3', 'leasehold'] : ['leasehold', 'etcd3']) {
        const t0 = now();
        const res = await phase(lib, phaseMs, { probes: lib === 'leasehold' });
        ctx.log(`  ${lib}: ${res.cycles} cycles in ${((now() - t0) / 1000).toFixed(1)} s`);
        results[lib].gaps.push(...res.gaps);
        results[lib].cycles += res.cycles;
        results[lib].seconds += res.seconds;
      }
    }
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    raw.close();
  }
  const floor50 = percentile(floor, 0.5);
  const rate = (lib) => results[lib].cycles / results[lib].seconds;
  const note = (lib) =>
    `${results[lib].cycles} cycles in ${results[lib].seconds.toFixed(1)} s; ops/s column = cycles/s`;
  const handoffRow = (lib, name) => ({
    ...latencyRow(id, name, results[lib].gaps),
    opsPerSec: Math.round(rate(lib)),
    note: note(lib),
  });
  return [
    judged(latencyRow(id, 'watch floor under the leasehold load', floor), 1, 'baseline'),
    judged(
      handoffRow('leasehold', 'leasehold handoff, 8 contenders / 4 processes'),
      percentile(results.leasehold.gaps, 0.5) / floor50,
      '≤1.5× floor (p50)',
      1.5,
    ),
    judged(
      handoffRow('etcd3', 'etcd3 Lock + 5 ms poll handoff'),
      percentile(results.etcd3.gaps, 0.5) / floor50,
      'peer',
    ),
    judged(
      {
        scenario: id,
        name: 'throughput: leasehold / etcd3 + 5 ms poll',
        opsPerSec: Math.round(rate('leasehold')),
        value: `${rate('leasehold').toFixed(0)} vs ${rate('etcd3').toFixed(0)} cycles/s`,
      },
      rate('leasehold') / rate('etcd3'),
      '≥3× etcd3',
      3,
      { atLeast: true },
    ),
  ];
}
