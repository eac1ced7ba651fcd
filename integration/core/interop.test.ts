import { connect, isLockTakenError, type Leasehold } from '@leasehold/core';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const etcdctl = process.env.ETCDCTL_BIN ?? 'etcdctl';
const available = spawnSync(etcdctl, ['version'], { encoding: 'utf8' }).status === 0;
if (!available)
  console.log(`[interop] skipped: ${etcdctl} not found; install etcd-client or set ETCDCTL_BIN`);

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
  child.kill('SIGINT'); // etcdctl closes its session (revoking the lease) on interrupt
  await exited;
}

describe.skipIf(!available)('interop with etcdctl lock (Go concurrency.Mutex)', () => {
  let client: Leasehold;
  const prefix = uniquePrefix('interop');
  beforeAll(async () => {
    client = await connect({ endpoints, lockPrefix: prefix });
  });
  afterAll(() => client.close());

  it('etcdctl holds → leasehold waits, and acquires once etcdctl lets go', async () => {
    const held = etcdctlLock(`${prefix}shared`);
    try {
      const key = await waitFor(() => held.acquired, { timeoutMs: 10_000, what: 'etcdctl lock' });
      expect(key.startsWith(`${prefix}shared/`)).toBe(true);
      const err = await client.tryAcquire('shared').catch((e: unknown) => e);
      expect(isLockTakenError(err)).toBe(true);
      const waiting = client.acquire('shared', { timeoutMs: 15_000 });
      await stop(held.child);
      const lock = await waiting;
      expect(lock.key.startsWith(`${prefix}shared/`)).toBe(true);
      await lock.release();
    } finally {
      await stop(held.child);
    }
  });

  it('leasehold holds → etcdctl waits, and acquires once leasehold releases', async () => {
    const lock = await client.acquire('shared2');
    const waiter = etcdctlLock(`${prefix}shared2`);
    try {
      // etcdctl must still be queued after it has had ample time to contend.
      const early = await Promise.race([
        waiter.acquired.then(() => 'acquired'),
        new Promise((resolve) => setTimeout(() => resolve('waiting'), 1_500)),
      ]);
      expect(early).toBe('waiting');
      await lock.release();
      const key = await waitFor(() => waiter.acquired, {
        timeoutMs: 10_000,
        what: 'etcdctl lock after release',
      });
      expect(key.startsWith(`${prefix}shared2/`)).toBe(true);
    } finally {
      await stop(waiter.child);
    }
  });
});
