// An idle queue: one holder and N waiters (in 4 processes, a client each, a session per waiter)
// that wait without anything happening. etcd's own counters over a window: CPU (% of one core,
// summed over members) and Range RPCs per second. Measured first with the same sessions not
// waiting, so what the queue itself costs is the difference (keepalives are the sessions').
import { connect } from '@leasehold/core';
import { Etcd3 } from 'etcd3';
import { cpuPercent, scrape, sum } from '../lib/metrics.mjs';
import { judged } from '../lib/rows.mjs';
import { sleep, until } from '../lib/stats.mjs';
import { startWorker } from '../lib/workers.mjs';

export const id = 'idle-queue';
export const title = 'idle queue of 100 and 1,000 waiters';

const PROCESSES = 4;
const SESSION_TTL_SECONDS = 60;

async function window(ctx, ms) {
  const before = await scrape(ctx.endpoints);
  await sleep(ms);
  const after = await scrape(ctx.endpoints);
  const ranges =
    sum(after, 'grpc_server_handled_total', { grpc_method: 'Range' }) -
    sum(before, 'grpc_server_handled_total', { grpc_method: 'Range' });
  return { cpu: cpuPercent(before, after), rangesPerSec: ranges / ((after.at - before.at) / 1000) };
}

export async function run(ctx) {
  const prefix = ctx.prefix('idle');
  const lockPrefix = `${prefix}lock/`;
  const windowMs = ctx.scale(20_000, 5_000);
  const sizes = ctx.scale([100, 1000], [20, 200]);
  const [small, large] = sizes;
  const raw = new Etcd3({ hosts: ctx.endpoints });
  const holder = await connect({ endpoints: ctx.endpoints, lockPrefix });
  const lock = await holder.acquire('q', { value: 'holder' });
  const workers = await Promise.all(
    Array.from({ length: PROCESSES }, () =>
      startWorker('waiters', { endpoints: ctx.endpoints, lockPrefix }),
    ),
  );
  const measured = {};
  try {
    for (const n of sizes) {
      await Promise.all(
        workers.map((w) =>
          w.request('sessions', { count: n / PROCESSES, ttlSeconds: SESSION_TTL_SECONDS }),
        ),
      );
      await sleep(1_000);
      const idle = await window(ctx, windowMs);
      const late = await Promise.all(workers.map((w) => w.request('wait', { name: 'q' })));
      ctx.log(`  ${n} waiters joining; joins not seen within 10 s: ${late.join(', ')}`);
      let queued = 0;
      await until(
        async () => (queued = await raw.getAll().prefix(`${lockPrefix}q/`).count()) >= n + 1,
        {
          timeoutMs: 120_000,
          everyMs: 200,
          what: () => `${n} waiters queued (${queued - 1} so far)`,
        },
      );
      await sleep(1_000);
      const waiting = await window(ctx, windowMs);
      const held = (await Promise.all(workers.map((w) => w.request('stop')))).reduce(
        (a, b) => a + b,
        0,
      );
      if (held > 0) throw new Error(`${held} idle waiters acquired a held lock`);
      measured[n] = { idle, waiting, share: waiting.cpu - idle.cpu };
      ctx.log(`  ${n} waiters: ${JSON.stringify(measured[n])}`);
    }
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    await lock.release().catch(() => undefined);
    await holder.close();
    raw.close();
  }
  const row = (n) => {
    const m = measured[n];
    return judged(
      {
        scenario: id,
        name: `idle queue of ${n} waiters: etcd CPU, queue's share`,
        n,
        value: `${m.share.toFixed(1)}% core (${m.waiting.cpu.toFixed(1)}% with, ${m.idle.cpu.toFixed(1)}% without waiting), ${m.waiting.rangesPerSec.toFixed(2)} Range/s`,
        cpuPercent: Math.round(m.waiting.cpu * 100) / 100,
        cpuPercentSessionsOnly: Math.round(m.idle.cpu * 100) / 100,
        rangesPerSec: Math.round(m.waiting.rangesPerSec * 100) / 100,
      },
      undefined,
      '≤5% of a core',
    );
  };
  const rows = [row(small), row(large)].map((r) => ({ ...r, met: measured[r.n].share <= 5 }));
  // Flat: the queue's CPU share does not grow with its length. Range RPCs per check grow only
  // with the pages of the keys-only read (1,000 keys a page), reported as the ratio.
  const flat =
    measured[large].waiting.rangesPerSec / Math.max(measured[small].waiting.rangesPerSec, 1e-9);
  const growth = measured[large].share - measured[small].share;
  rows.push({
    scenario: id,
    name: `idle queue ${large} / ${small} waiters: flat?`,
    value: `CPU share ${measured[small].share.toFixed(1)}% → ${measured[large].share.toFixed(1)}%`,
    ratio: Math.round(flat * 1000) / 1000,
    target: 'CPU share grows ≤1 point',
    met: growth <= 1,
    note: `ratio = Range/s, ${large} vs ${small} waiters; ${PROCESSES} waiting clients, each reading the prefix (keys only, 1,000 keys a page) every recheckIntervalMs`,
  });
  return rows;
}
