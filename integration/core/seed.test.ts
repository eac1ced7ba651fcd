import { connect, defaults, isLockLostError } from '@leasehold/core';
import { Etcd3 } from 'etcd3';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { Worker } from './workers/worker.js';

const endpoints = sharedEndpoints();
const admin = new Etcd3({ hosts: endpoints });
afterAll(() => admin.close());

describe('the seed scenario: a paused holder wakes up after losing its lock', () => {
  it('rejects the stale holder’s fenced write and keeps the new holder’s data', async () => {
    const prefix = uniquePrefix('seed');
    const name = `${prefix}lock`;
    const record = `${prefix}record`;
    await using a = await Worker.start(endpoints.join(','), 2);
    await using b = await Worker.start(endpoints.join(','), 2);

    const t1 = BigInt((await a.request('acquire', { id: 'a', name })).token as string);
    expect((await a.request('write', { id: 'a', key: record, value: 'A' })).ok).toBe(true);

    a.child.kill('SIGSTOP');
    // B queues behind A and gets the lock once A's lease expires on the server (A is frozen).
    const t2 = BigInt((await b.request('acquire', { id: 'b', name }, 20_000)).token as string);
    expect(t2 > t1).toBe(true);
    expect((await b.request('write', { id: 'b', key: record, value: 'B' })).ok).toBe(true);

    a.child.kill('SIGCONT');
    const stale = await a.request('write', { id: 'a', key: record, value: 'A-stale' });
    expect(stale.ok).toBe(false);
    expect(stale.error).toBe('LockLostError');
    // A's own lock signal had already aborted when its code ran again.
    expect(stale.abortedBefore).toBe(true);
    expect(await admin.get(record).string()).toBe('B');
  });

  it('a holder’s signal aborts on the delete event when a third client deletes its key, not at the periodic re-check', async () => {
    await using client = await connect({ endpoints, lockPrefix: uniquePrefix('seed-delete') });
    const lock = await client.acquire('job', { timeoutMs: 5_000 });
    const started = performance.now();
    await admin.delete().key(lock.key);
    await waitFor(() => lock.signal.aborted, {
      timeoutMs: defaults.recheckIntervalMs,
      what: 'holder signal after delete',
    });
    expect(performance.now() - started).toBeLessThan(defaults.recheckIntervalMs);
    const err = await lock.put(`${client.lockPrefix}data`, 'late').catch((e: unknown) => e);
    expect(isLockLostError(err)).toBe(true);
  });
});

describe('mutual exclusion across processes', () => {
  it('20 concurrent acquirers in 3 processes never overlap; tokens grow with each hold', async () => {
    const prefix = uniquePrefix('exclusion');
    const workers = await Promise.all([0, 1, 2].map(() => Worker.start(endpoints.join(','), 5)));
    try {
      const perProcess = [7, 7, 6];
      const results = await Promise.all(
        workers.map((w, i) =>
          w.request(
            'contend',
            {
              name: `${prefix}lock`,
              rounds: 2,
              concurrency: perProcess[i],
              ownerKey: `${prefix}owner`,
              tag: `p${i}`,
            },
            60_000,
          ),
        ),
      );
      const records = results.flatMap(
        (r) =>
          r.records as { me: string; token: string; before: string | null; after: string | null }[],
      );
      expect(records).toHaveLength(40);
      for (const r of records) {
        expect(r.before).toBeNull(); // nobody else was inside
        expect(r.after).toBe(r.me); // nobody came in while we were
      }
      const tokens = records.map((r) => BigInt(r.token));
      expect(new Set(tokens).size).toBe(tokens.length);
    } finally {
      await Promise.all(workers.map((w) => w[Symbol.asyncDispose]()));
    }
  }, 90_000);
});
