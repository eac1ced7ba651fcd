/**
 * A hold's fenced writes stay out of the lock and election queues: a key written inside one
 * without a lease would sit in that queue for good, blocking every later holder of that lock or
 * election. Such a write, and one that names a key twice (etcd refuses the txn), get a typed
 * error at the call, before anything is sent; the hold is unharmed.
 */
import { connect, isInvalidArgumentError } from '@leasehold/core';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

async function rejection(p: Promise<unknown>): Promise<Error> {
  return p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err as Error,
  );
}

describe('fenced writes and the queues', () => {
  it('refuses a key inside a lock or election queue, its own key included, and writes nothing', async () => {
    const lockPrefix = uniquePrefix('fw-lock');
    const electionPrefix = uniquePrefix('fw-election');
    await using a = await connect({ endpoints, lockPrefix, electionPrefix });
    await using b = await connect({ endpoints, lockPrefix, electionPrefix });
    const lock = await a.acquire('mine');
    for (const key of [`${lockPrefix}victim/1`, lock.key, `${electionPrefix}vote/1`]) {
      const err = await rejection(lock.put(key, 'x'));
      expect(isInvalidArgumentError(err), String(err)).toBe(true);
      expect(err.message).toContain(JSON.stringify(key));
      expect(err.message).toMatch(/outside the lock and election queues/);
      expect(await admin.get(key).string()).toBe(key === lock.key ? lock.value : null);
    }
    expect(lock.isHeld).toBe(true);
    // Nothing blocks the queues: another client takes the lock and wins the election at once.
    await (await b.tryAcquire('victim')).release();
    await (await b.campaign('vote', 'b', { timeoutMs: 5_000 })).resign();
    // Keys directly under a prefix are in no queue: still allowed.
    await lock.put(`${lockPrefix}data`, 'ok');
    expect(await admin.get(`${lockPrefix}data`).string()).toBe('ok');
    await lock.release();
  });

  it('refuses a write that names a key twice, before sending it', async () => {
    await using client = await connect({ endpoints, lockPrefix: uniquePrefix('fw-dup') });
    const lock = await client.acquire('job');
    const key = `${uniquePrefix('fw-dup-data')}k`;
    const err = await rejection(
      lock.fencedWrite([
        { type: 'put', key, value: '1' },
        { type: 'delete', key },
      ]),
    );
    expect(isInvalidArgumentError(err), String(err)).toBe(true);
    expect(err.message).toMatch(/^ops\[1\]\.key must be a key no other op of the write names/);
    expect(await admin.get(key).string()).toBeNull();
    expect(lock.isHeld).toBe(true);
    await lock.release();
  });
});
