// Partition trials: a lock holder reaches etcd only through a TCP fault proxy; the proxy
// stalls (a partition: nothing flows, nothing is closed). The holder's lock signal must fire
// before etcd expires the lease and lets someone else in; etcd's expiry is observed by a second
// client not behind the proxy (the lock key's delete event). Reports the fraction of trials where
// the signal fired first, and by how much.
import { Etcd3 } from 'etcd3';
import { connect } from '@leasehold/core';
import { TcpFaultProxy } from '@leasehold/testing';
import { now, percentile, round, sleep, until } from '../lib/stats.mjs';

export const id = 'partition';
export const title = "partition: the holder's signal fires before the lease expires";

const TTL_SECONDS = 2;

export async function run(ctx) {
  const prefix = ctx.prefix('partition');
  const lockPrefix = `${prefix}lock/`;
  const raw = new Etcd3({ hosts: ctx.endpoints });
  const proxy = await TcpFaultProxy.start({ target: ctx.endpoints[0] });
  const deleted = new Map();
  const watcher = await raw.watch().prefix(lockPrefix).create();
  watcher.on('delete', (kv) => deleted.set(kv.key.toString(), now()));
  const trials = ctx.scale(10, 3);
  const margins = [];
  try {
    for (let t = 0; t < trials; t++) {
      proxy.setMode('pass');
      const client = await connect({ endpoints: proxy.url, lockPrefix });
      try {
        const session = await client.session({ ttlSeconds: TTL_SECONDS });
        const lock = await client.acquire(`p${t}`, { session });
        let fired;
        lock.signal.addEventListener('abort', () => (fired = now()), { once: true });
        // Stall at a different point of the keepalive cycle each trial.
        await sleep(((TTL_SECONDS * 1000) / 3) * (t / trials));
        proxy.setMode('stall');
        const expired = await until(() => deleted.get(lock.key), {
          timeoutMs: TTL_SECONDS * 1000 + 5_000,
          what: 'the lease to expire',
        });
        await until(() => fired, { timeoutMs: 5_000, what: "the holder's signal" });
        margins.push(expired - fired);
      } finally {
        proxy.setMode('pass');
        await client.close();
      }
    }
  } finally {
    await watcher.cancel();
    await proxy.close();
    raw.close();
  }
  const first = margins.filter((m) => m > 0).length / margins.length;
  return [
    {
      scenario: id,
      name: `partitioned holder (TTL ${TTL_SECONDS} s): signal before expiry`,
      n: margins.length,
      p50: round(percentile(margins, 0.5), 3),
      value: `${(first * 100).toFixed(0)}% of trials first; margin p50 ${percentile(margins, 0.5).toFixed(0)} ms, min ${Math.min(...margins).toFixed(0)} ms`,
      ratio: first,
      target: '100% of trials',
      met: first === 1,
      marginsMs: margins.map((m) => round(m, 1)),
      note: 'p50 column = margin (expiry seen by another client − signal fired)',
    },
  ];
}
