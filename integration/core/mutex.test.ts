import {
  connect,
  isLockLostError,
  isLockTakenError,
  isLockTimeoutError,
  type Leasehold,
  type Lock,
} from '@leasehold/core';
import { TcpFaultProxy } from '@leasehold/testing';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = new Etcd3({ hosts: endpoints });
let client: Leasehold;

beforeAll(async () => {
  client = await connect({ endpoints, lockPrefix: uniquePrefix('mutex') });
});
afterAll(async () => {
  await client.close();
  admin.close();
});

async function keysUnder(prefix: string): Promise<string[]> {
  return admin.getAll().prefix(prefix).keys();
}

describe('Mutex on a real etcd', () => {
  it('acquires uncontended in one transaction and releases, leaving no key', async () => {
    const lock = await client.acquire('solo');
    expect(typeof lock.token).toBe('bigint');
    expect(lock.key).toBe(`${client.lockPrefix}solo/${lock.session.leaseId.toString(16)}`);
    const kv = await admin.get(lock.key).exec();
    expect(BigInt(kv.kvs[0]!.create_revision)).toBe(lock.token);
    await lock.release();
    await lock.release();
    expect(lock.signal.aborted).toBe(true);
    expect((lock.signal.reason as Error).name).toBe('LockReleasedError');
    expect(await keysUnder(`${client.lockPrefix}solo/`)).toEqual([]);
  });

  it('serves 5 waiters in FIFO order with strictly increasing tokens', async () => {
    const holder = await client.acquire('fifo');
    const order: number[] = [];
    const tokens: bigint[] = [holder.token];
    const sessions = await Promise.all(
      [0, 1, 2, 3, 4].map(() => client.session({ ttlSeconds: 5 })),
    );
    const waiters: Promise<void>[] = [];
    for (let i = 0; i < 5; i++) {
      const acquired = client.acquire('fifo', { session: sessions[i] });
      waiters.push(
        acquired.then(async (lock) => {
          order.push(i);
          tokens.push(lock.token);
          await lock.release();
        }),
      );
      // Queue position is fixed by the create revision of each waiter's key.
      await waitFor(async () => (await keysUnder(`${client.lockPrefix}fifo/`)).length === i + 2, {
        timeoutMs: 5_000,
        what: `waiter ${i} queued`,
      });
    }
    await holder.release();
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]! > tokens[i - 1]!).toBe(true);
    await Promise.all(sessions.map((s) => s.close()));
  });

  it('withLock releases the lock when its function throws', async () => {
    const failure = new Error('job failed');
    let seen: bigint | undefined;
    await expect(
      client.withLock('with-lock', ({ token }) => {
        seen = token;
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(typeof seen).toBe('bigint');
    expect(await keysUnder(`${client.lockPrefix}with-lock/`)).toEqual([]);
  });

  it('rejects bad input at the call, before touching etcd', async () => {
    for (const name of ['', 42, 'a\0b', 'x'.repeat(2000)]) {
      await expect(client.acquire(name as string)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
      });
    }
    for (const timeoutMs of [0, -1, Number.NaN]) {
      await expect(client.acquire('bad', { timeoutMs })).rejects.toThrow(
        /timeoutMs must be a positive/,
      );
    }
    const reason = new Error('already cancelled');
    await expect(client.acquire('bad', { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(await keysUnder(`${client.lockPrefix}bad/`)).toEqual([]);
  });

  it('tokens increase across names too', async () => {
    const a = await client.acquire('names-a');
    const b = await client.acquire('names-b');
    expect(b.token > a.token).toBe(true);
    await a.release();
    await b.release();
  });

  it('keeps "jobs" and "jobs/a" independent', async () => {
    const jobs = await client.acquire('jobs');
    const sub = await client.tryAcquire('jobs/a');
    expect(sub.key).toContain('jobs%2Fa/');
    await Promise.all([jobs.release(), sub.release()]);
  });

  it('tryAcquire reports the holder; leaves no key behind', async () => {
    const other = await client.session({ ttlSeconds: 5 });
    const holder = await client.acquire('try', { session: other });
    const err = await client.tryAcquire('try').catch((e: unknown) => e);
    expect(isLockTakenError(err)).toBe(true);
    if (isLockTakenError(err)) {
      expect(err.holderKey).toBe(holder.key);
      expect(err.holderToken).toBe(holder.token);
    }
    expect(await keysUnder(`${client.lockPrefix}try/`)).toEqual([holder.key]);
    await holder.release();
    await other.close();
  });

  it('queues two acquisitions on one session locally, each with its own token', async () => {
    const first = await client.acquire('local');
    const second = client.acquire('local');
    const early = await Promise.race([second.then(() => 'acquired'), Promise.resolve('waiting')]);
    expect(early).toBe('waiting');
    await first.release();
    const lock = await second;
    expect(lock.key).toBe(first.key);
    expect(lock.token > first.token).toBe(true);
    // The first hold's delete event (same key, older revision) must not end the second hold:
    // a fenced write under the watched prefix lands, and its event comes after that delete.
    await lock.put(`${client.lockPrefix}local-data`, 'second');
    await waitFor(
      async () => (await admin.get(`${client.lockPrefix}local-data`).string()) === 'second',
      {
        timeoutMs: 2_000,
        what: 'fenced write visible',
      },
    );
    expect(lock.isHeld).toBe(true);
    await lock.release();
  });

  it('times out and aborts a wait, removing the waiter key', async () => {
    const other = await client.session({ ttlSeconds: 5 });
    const holder = await client.acquire('wait-cancel', { session: other });
    const timeoutErr = await client
      .acquire('wait-cancel', { timeoutMs: 300 })
      .catch((e: unknown) => e);
    expect(isLockTimeoutError(timeoutErr)).toBe(true);
    const controller = new AbortController();
    const aborted = client
      .acquire('wait-cancel', { signal: controller.signal })
      .catch((e: unknown) => e);
    await waitFor(async () => (await keysUnder(`${client.lockPrefix}wait-cancel/`)).length === 2, {
      timeoutMs: 5_000,
      what: 'waiter queued',
    });
    const reason = new Error('no longer needed');
    controller.abort(reason);
    expect(await aborted).toBe(reason); // at once; the waiter's key is withdrawn right after
    await waitFor(
      async () =>
        JSON.stringify(await keysUnder(`${client.lockPrefix}wait-cancel/`)) ===
        JSON.stringify([holder.key]),
      { timeoutMs: 5_000, what: 'waiter keys withdrawn' },
    );
    await holder.release();
    await other.close();
  });

  it('a delayed release of an old hold never deletes a newer hold (etcd #22082)', async () => {
    const session = await client.session({ ttlSeconds: 5 });
    const old = await client.acquire('late-release', { session });
    // Someone removes the old key (e.g. an operator); a new holder takes the lock.
    await admin.delete().key(old.key);
    await waitFor(() => old.signal.aborted, { timeoutMs: 1_000, what: 'old hold lost' });
    const newer = await client.acquire('late-release');
    await old.release();
    await old.release();
    const kv = await admin.get(newer.key).exec();
    expect(BigInt(kv.kvs[0]!.create_revision)).toBe(newer.token);
    expect(newer.isHeld).toBe(true);
    await newer.release();
    await session.close();
  });

  it('signals within 1 s when a third client deletes the key; fenced writes are then refused', async () => {
    const lock = await client.acquire('deleted');
    const deletedAt = performance.now();
    await admin.delete().key(lock.key);
    await waitFor(() => lock.signal.aborted, {
      timeoutMs: 1_000,
      what: 'lock signal after delete',
    });
    console.log(
      `[mutex] key delete seen by holder after ${(performance.now() - deletedAt).toFixed(0)} ms`,
    );
    const reason: unknown = lock.signal.reason;
    expect(isLockLostError(reason) && reason.reason).toBe('deleted');
    const err = await lock.put(`${client.lockPrefix}data`, 'x').catch((e: unknown) => e);
    expect(isLockLostError(err)).toBe(true);
    await lock.release();
  });

  it('signals when the key is overwritten', async () => {
    const lock = await client.acquire('overwritten');
    await admin.put(lock.key).value('hijack');
    await waitFor(() => lock.signal.aborted, {
      timeoutMs: 1_000,
      what: 'lock signal after overwrite',
    });
    const reason: unknown = lock.signal.reason;
    expect(isLockLostError(reason) && reason.reason).toBe('overwritten');
    await lock.release();
    await admin.delete().key(lock.key);
  });

  it('fenced writes land only while held; a released handle refuses with a typed error', async () => {
    const lock = await client.acquire('fenced');
    const dataKey = `${client.lockPrefix}fenced-data`;
    const revision = await lock.fencedWrite([{ type: 'put', key: dataKey, value: 'v1' }]);
    expect(revision > lock.token).toBe(true);
    expect(await admin.get(dataKey).string()).toBe('v1');
    // The guard works in the caller's own etcd transaction.
    const txn = await admin
      .if(lock.guard.key, 'Create', '==', lock.guard.createRevision.toString())
      .then(admin.put(dataKey).value('v2'))
      .commit();
    expect(txn.succeeded).toBe(true);
    await lock.release();
    const err = await lock.put(dataKey, 'v3').catch((e: unknown) => e);
    expect((err as Error).name).toBe('LockReleasedError');
    expect(await admin.get(dataKey).string()).toBe('v2');
  });

  it('rejects acquire on a lost session and leaves no key', async () => {
    const session = await client.session({ ttlSeconds: 5 });
    await session.close();
    const err = await client.acquire('lost-session', { session }).catch((e: unknown) => e);
    expect((err as Error).name).toBe('SessionClosedError');
    expect(await keysUnder(`${client.lockPrefix}lost-session/`)).toEqual([]);
  });

  it('a waiter whose lease expires in the queue gets LockLostError or LeaseLostError, never the lock', async () => {
    const other = await client.session({ ttlSeconds: 5 });
    const holder = await client.acquire('expire-queue', { session: other });
    const waiterSession = await client.session({ ttlSeconds: 5 });
    const waiting = client
      .acquire('expire-queue', { session: waiterSession })
      .catch((e: unknown) => e);
    await waitFor(async () => (await keysUnder(`${client.lockPrefix}expire-queue/`)).length === 2, {
      timeoutMs: 5_000,
      what: 'waiter queued',
    });
    await admin.leaseClient.leaseRevoke({ ID: waiterSession.leaseId.toString() });
    const err = (await waiting) as Error;
    expect(['LockLostError', 'LeaseLostError']).toContain(err.name);
    await holder.release();
    await other.close();
  });

  it('a waiter survives compaction of the revision it watches', async () => {
    const holderSession = await client.session({ ttlSeconds: 5 });
    const holder = await client.acquire('compaction', { session: holderSession });
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    await using waiterClient = await connect({
      endpoints: [proxy.url],
      lockPrefix: client.lockPrefix,
      session: { ttlSeconds: 10 },
    });
    const waiting = waiterClient.acquire('compaction');
    await waitFor(async () => (await keysUnder(`${client.lockPrefix}compaction/`)).length === 2, {
      timeoutMs: 5_000,
      what: 'waiter queued',
    });
    // Cut the waiter off, release and compact past the delete, then heal: its watch resumes
    // from a compacted revision, which etcd refuses; the waiter must re-read and take the lock.
    proxy.setMode('reset');
    await holder.release();
    for (let i = 0; i < 3; i++) await admin.put(`${client.lockPrefix}churn`).value(String(i));
    const head = await admin.get(`${client.lockPrefix}churn`).exec();
    await admin.kv.compact({ revision: head.header.revision, physical: true });
    proxy.setMode('pass');
    const lock: Lock = await waitFor(() => waiting, {
      timeoutMs: 10_000,
      what: 'waiter acquired after compaction',
    });
    expect(lock.token > holder.token).toBe(true);
    await lock.release();
    await holderSession.close();
  });
});
