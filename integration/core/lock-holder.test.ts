/**
 * Holder values on locks: who holds a lock is written on its key (`hostname:pid` unless told
 * otherwise), reported by `client.holder()` and by `LockTakenError`. `etcdctl lock` writes an
 * empty value, which must read as '' rather than break anything.
 */
import { connect, isLockTakenError, type Leasehold } from '@leasehold/core';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { hostname } from 'node:os';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
const lockPrefix = uniquePrefix('lock-holder');
const etcdctl = process.env.ETCDCTL_BIN ?? 'etcdctl';
const haveEtcdctl = spawnSync(etcdctl, ['version'], { encoding: 'utf8' }).status === 0;
if (!haveEtcdctl)
  console.log(`[lock-holder] etcdctl test skipped: ${etcdctl} not found; set ETCDCTL_BIN`);

let a: Leasehold;
let b: Leasehold;
beforeAll(async () => {
  const electionPrefix = uniquePrefix('lock-holder-elections');
  a = await connect({ endpoints, lockPrefix, electionPrefix });
  b = await connect({ endpoints, lockPrefix, electionPrefix });
});
afterAll(async () => {
  await Promise.all([a.close(), b.close()]);
  admin.close();
});

const rawValue = async (key: string) => (await admin.get(key).exec()).kvs[0]?.value.toString();
const keysOf = (name: string) => admin.getAll().prefix(`${lockPrefix}${name}/`).keys();

describe('lock holder values', () => {
  it('defaults to hostname:pid, written on the key and reported by holder()', async () => {
    const expected = `${hostname()}:${process.pid}`;
    const lock = await a.acquire('default');
    expect(lock.value).toBe(expected);
    expect(await rawValue(lock.key)).toBe(expected);
    expect(await b.holder('default')).toEqual({
      value: expected,
      valueBytes: new Uint8Array(Buffer.from(expected)),
      token: lock.token,
      key: lock.key,
      leaseId: lock.session.leaseId,
    });
    await lock.release();
    expect(await b.holder('default')).toBeUndefined();
  });

  it('holder() is undefined for a lock never taken', async () => {
    expect(await a.holder('never-taken')).toBeUndefined();
  });

  it("takes a custom value from acquire's and tryAcquire's value option", async () => {
    const lock = await a.acquire('custom', { value: 'worker-7 (job 42) ✓' });
    expect(lock.value).toBe('worker-7 (job 42) ✓');
    expect(await rawValue(lock.key)).toBe('worker-7 (job 42) ✓');
    expect(await b.holder('custom')).toMatchObject({ value: 'worker-7 (job 42) ✓' });
    await lock.release();
    const tried = await a.tryAcquire('custom', { value: '' });
    expect(tried.value).toBe('');
    expect(await b.holder('custom')).toMatchObject({ value: '', token: tried.token });
    await tried.release();
  });

  it("a waiter's value is on its key while it waits and is reported once it holds", async () => {
    const first = await a.acquire('queue', { value: 'first' });
    const waiting = b.acquire('queue', { value: 'second', timeoutMs: 20_000 });
    await waitFor(async () => (await keysOf('queue')).length === 2, { what: 'waiter queued' });
    const values = await admin.getAll().prefix(`${lockPrefix}queue/`).strings();
    expect(Object.values(values).sort()).toEqual(['first', 'second']);
    expect(await a.holder('queue')).toMatchObject({ value: 'first', token: first.token });
    await first.release();
    const second = await waiting;
    expect(await a.holder('queue')).toMatchObject({ value: 'second', token: second.token });
    await second.release();
  });

  it('LockTakenError carries the holder value and its message names the holder', async () => {
    const lock = await a.acquire('taken', { value: 'billing-worker-3' });
    const err = await b.tryAcquire('taken').catch((e: unknown) => e);
    expect(isLockTakenError(err)).toBe(true);
    if (!isLockTakenError(err)) return;
    expect(err.holderValue).toBe('billing-worker-3');
    expect(err.holderKey).toBe(lock.key);
    expect(err.holderToken).toBe(lock.token);
    expect(err.lockName).toBe('taken');
    expect(err.message).toContain('"billing-worker-3"');
    expect(err.message).toContain(lock.key);
    expect(err.message).toContain(String(lock.token));
    expect(await keysOf('taken')).toEqual([lock.key]);
    await lock.release();
  });

  it('LockTakenError from the same session names the holder value too', async () => {
    const lock = await a.acquire('taken-local', { value: 'me, already' });
    const err = await a.tryAcquire('taken-local').catch((e: unknown) => e);
    expect(isLockTakenError(err) && err.holderValue).toBe('me, already');
    await lock.release();
  });
});

/** Runs `etcdctl lock <name>`, which prints its key once it holds the lock. */
function etcdctlLock(name: string): { child: ChildProcess; acquired: Promise<string> } {
  const child = spawn(etcdctl, ['--endpoints', endpoints.join(','), 'lock', name], {
    env: { ...process.env, ETCDCTL_API: '3' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const acquired = new Promise<string>((resolve) => {
    createInterface({ input: child.stdout }).once('line', resolve);
  });
  return { child, acquired };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGINT');
  await exited;
}

describe.skipIf(!haveEtcdctl)('holder values with etcdctl lock', () => {
  it("etcdctl lock's empty value reads as ''; tryAcquire's LockTakenError still names it", async () => {
    const held = etcdctlLock(`${lockPrefix}ctl`);
    try {
      const key = await waitFor(() => held.acquired, { timeoutMs: 10_000, what: 'etcdctl lock' });
      expect(await rawValue(key)).toBe('');
      const holder = await a.holder('ctl');
      expect(holder).toMatchObject({ value: '', key });
      expect(key).toBe(`${lockPrefix}ctl/${holder!.leaseId.toString(16)}`);
      const err = await a.tryAcquire('ctl').catch((e: unknown) => e);
      expect(isLockTakenError(err)).toBe(true);
      if (!isLockTakenError(err)) return;
      expect(err.holderValue).toBe('');
      expect(err.holderKey).toBe(key);
      expect(err.holderToken).toBe(holder!.token);
      expect(err.message).toBe(`lock "ctl" is held by ${key} (token ${holder!.token})`);
      expect(await keysOf('ctl')).toEqual([key]);
    } finally {
      await stop(held.child);
    }
    expect(await a.holder('ctl')).toBeUndefined();
  });
});
