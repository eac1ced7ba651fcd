// Many idle waiters in one process: `count` sessions on one client, each waiting for the same
// lock, until told to stop.
import { connect } from '@leasehold/core';
import { Etcd3 } from 'etcd3';
import { sleep } from '../lib/stats.mjs';
import { serve, workerConfig } from '../lib/workers.mjs';

const config = workerConfig();
const init = connect({ endpoints: config.endpoints, lockPrefix: config.lockPrefix });
const raw = new Etcd3({ hosts: config.endpoints });
let sessions = [];
let stop = new AbortController();
let waits = [];

serve(init, {
  sessions: async ({ count, ttlSeconds }) => {
    const client = await init;
    // A few grants at a time, each tried again if it timed out on a busy machine (a grant whose
    // answer was lost leaves a lease that expires unused).
    const grant = async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await client.session({ ttlSeconds });
        } catch (err) {
          if (attempt >= 5) throw err;
        }
      }
    };
    for (let i = 0; i < count; i += 8) {
      const batch = Math.min(8, count - i);
      sessions.push(...(await Promise.all(Array.from({ length: batch }, grant))));
    }
  },
  /**
   * Starts every session waiting, one join at a time: the next starts once the last one's key
   * is in etcd (hundreds of joins at once time out on a busy machine). A join that failed is
   * tried again.
   */
  wait: async ({ name }) => {
    const client = await init;
    const signal = stop.signal;
    const waitOn = async (session) => {
      while (!signal.aborted) {
        try {
          await client.acquire(name, { session, signal, value: 'w' });
          return 'held';
        } catch {
          await sleep(500);
        }
      }
      return 'stopped';
    };
    const range = `${config.lockPrefix}${name}/`;
    let late = 0;
    for (const session of sessions) {
      waits.push(waitOn(session));
      const key = `${range}${session.leaseId.toString(16)}`;
      const deadline = Date.now() + 10_000;
      while (!(await raw.get(key).exists()) && Date.now() < deadline) await sleep(2);
      if (Date.now() >= deadline) late++;
    }
    return late;
  },
  stop: async () => {
    stop.abort();
    const outcomes = await Promise.all(waits);
    // A few revokes at a time: hundreds at once time out on a busy machine.
    for (let i = 0; i < sessions.length; i += 8) {
      await Promise.all(sessions.slice(i, i + 8).map((s) => s.close()));
    }
    [sessions, waits, stop] = [[], [], new AbortController()];
    return outcomes.filter((o) => o === 'held').length;
  },
  close: async () => {
    await (await init).close();
    raw.close();
  },
});
