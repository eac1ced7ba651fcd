/**
 * tryAcquire's LockTakenError names the real holder and its token, also when this session
 * already has an entry for the lock waiting behind another process.
 */
import { connect, isLockTakenError } from '@leasehold/core';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

describe('LockTakenError names the holder', () => {
  it('while this session waits behind another process, tryAcquire reports that process as the holder', async () => {
    const lockPrefix = uniquePrefix('try-holder');
    await using a = await connect({ endpoints, lockPrefix });
    await using b = await connect({ endpoints, lockPrefix });
    const session = await a.session({ ttlSeconds: 30 });
    const first = await a.acquire('job', { session });
    const oldToken = first.token;
    await first.release();
    const held = await b.acquire('job');
    const waiting = a.acquire('job', { session, timeoutMs: 20_000 });
    waiting.catch(() => {});
    await waitFor(
      async () => (await admin.getAll().prefix(`${lockPrefix}job/`).keys()).length === 2,
      {
        what: 'A waits behind B',
      },
    );
    const err = await a.tryAcquire('job', { session }).catch((e: unknown) => e);
    expect(isLockTakenError(err)).toBe(true);
    if (!isLockTakenError(err)) return;
    console.log(
      `[try-holder] LockTakenError says holder ${err.holderKey} token ${err.holderToken}; real holder ${held.key} token ${held.token}; A's released token was ${oldToken}`,
    );
    expect(err.holderKey).toBe(held.key);
    expect(err.holderToken).toBe(held.token);
    await held.release();
    await (await waiting).release();
  });
});
