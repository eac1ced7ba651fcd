/**
 * Tests that stop, restart or reconfigure etcd: each starts a cluster of its own, even when
 * ETCD_ENDPOINTS points the rest of the suite at an external one.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  connect,
  isAuthError,
  isClusterChangedError,
  isConnectError,
  type Leasehold,
} from '@leasehold/core';
import { startEtcd, TcpFaultProxy } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { etcdClient, onCleanup, uniquePrefix, waitFor } from '../setup/etcd.js';

const own = (members: 1 | 3 = 1) => startEtcd({ members, provider: 'local' });
const etcdctl = process.env.ETCDCTL_BIN ?? 'etcdctl';
const haveEtcdctl = spawnSync(etcdctl, ['version']).status === 0;

describe('close() during an etcd outage', () => {
  it('lets a process holding a lock exit within 2 s after etcd is killed', async () => {
    // A killed etcd process closes its sockets at once, so the client's streams are already
    // reconnecting when close() comes: the case the first pass leaked a reconnect loop in.
    await using etcd = await startEtcd({ provider: 'binary' });
    const script = fileURLToPath(new URL('./workers/close-worker.mjs', import.meta.url));
    const child = spawn(process.execPath, [script, etcd.endpoints.join(',')], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const exited = once(child, 'exit');
    try {
      const lines = createInterface({ input: child.stdout });
      const next = () => once(lines, 'line').then(([line]) => line as string);
      expect(await waitFor(() => next(), { timeoutMs: 15_000, what: 'child holds the lock' })).toBe(
        'held',
      );
      await etcd.members[0]!.kill();
      // The outage is visible (a fresh connect fails after retrying for a while), so the child's
      // watch and keepalive streams have broken and are trying to reconnect when close() comes.
      const probe = await connect({ endpoints: etcd.endpoints, dialTimeoutMs: 1_500 }).catch(
        (e: unknown) => e,
      );
      expect(isConnectError(probe)).toBe(true);
      const closing = performance.now();
      child.stdin.write('close\n');
      expect(await waitFor(() => next(), { timeoutMs: 5_000, what: 'child closed' })).toBe(
        'closed',
      );
      await waitFor(() => exited, { timeoutMs: 2_000, what: 'child exits after close()' });
      console.log(
        `[close] child exited ${(performance.now() - closing).toFixed(0)} ms after close was asked`,
      );
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('a lost session after etcd restarts', () => {
  it('revokes its lease once etcd is back, so the lock passes on well before the restored TTL', async () => {
    await using etcd = await own();
    const lockPrefix = uniquePrefix('revoke-retry');
    await using holder = await connect({
      endpoints: etcd.endpoints,
      lockPrefix,
      callTimeoutMs: 1_000,
    });
    onCleanup(holder, () => {});
    const session = await holder.session({ ttlSeconds: 5 });
    await holder.acquire('job', { session });
    await etcd.members[0]!.kill();
    await waitFor(() => session.isLost, {
      timeoutMs: 10_000,
      what: 'session lost while etcd is down',
    });
    await etcd.members[0]!.start(); // etcd restores the lease with a fresh 5 s TTL
    const back = performance.now();
    await using other = await connect({ endpoints: etcd.endpoints, lockPrefix });
    const lock = await other.acquire('job', { timeoutMs: 10_000 });
    const tookMs = performance.now() - back;
    console.log(
      `[revoke-retry] lock passed on ${tookMs.toFixed(0)} ms after etcd came back (TTL 5000 ms)`,
    );
    // Without the revoke retried once etcd answered, the lock would pass only when the restored
    // lease ran out its fresh TTL.
    expect(tookMs).toBeLessThan(5_000);
    await lock.release();
  }, 60_000);
});

describe('aborting while connecting or granting', () => {
  it('connect() and session() stop at the signal and leave no lease behind', async () => {
    await using etcd = await own();
    const admin = etcdClient(etcd.endpoints);
    try {
      await using proxy = await TcpFaultProxy.start({ target: etcd.endpoints[0]! });
      proxy.setMode('stall');
      let started = performance.now();
      const dialing = await connect({
        endpoints: [proxy.url],
        dialTimeoutMs: 10_000,
        signal: AbortSignal.timeout(200),
      }).catch((e: unknown) => e);
      expect((dialing as Error).name).toBe('TimeoutError');
      // The first probe attempt alone would hang for the call deadline (5 s by default).
      expect(performance.now() - started).toBeLessThan(5_000);

      proxy.setMode('pass');
      await using client = await connect({ endpoints: [proxy.url], callTimeoutMs: 10_000 });
      const DELAY_MS = 1_500;
      proxy.setMode('delay', { delayMs: DELAY_MS });
      started = performance.now();
      const granting = await client
        .session({ ttlSeconds: 30, signal: AbortSignal.timeout(200) })
        .catch((e: unknown) => e);
      expect((granting as Error).name).toBe('TimeoutError');
      // Sooner than the grant's delayed answer: it stopped at the signal.
      expect(performance.now() - started).toBeLessThan(DELAY_MS);
      proxy.setMode('pass');
      // The grant lands after the caller gave up; the client revokes it.
      await waitFor(async () => (await admin.leaseClient.leaseLeases()).leases.length === 0, {
        timeoutMs: 15_000,
        what: 'the abandoned lease is revoked',
      });
    } finally {
      admin.close();
    }
  }, 40_000);
});

describe.skipIf(!haveEtcdctl)('authentication', () => {
  it('connect() fails with AuthError for missing or wrong credentials, and works with the right ones', async () => {
    await using etcd = await own();
    const ctl = (...args: string[]) => {
      const run = spawnSync(etcdctl, ['--endpoints', etcd.endpoints[0]!, ...args], {
        env: { ...process.env, ETCDCTL_API: '3' },
        encoding: 'utf8',
      });
      if (run.status !== 0) throw new Error(`etcdctl ${args.join(' ')}: ${run.stderr}`);
    };
    ctl('user', 'add', 'root', '--new-user-password=root-pw');
    ctl('user', 'grant-role', 'root', 'root');
    ctl('auth', 'enable');
    const missing = await connect({ endpoints: etcd.endpoints }).catch((e: unknown) => e);
    expect(isAuthError(missing)).toBe(true);
    const wrong = await connect({
      endpoints: etcd.endpoints,
      auth: { username: 'root', password: 'nope' },
    }).catch((e: unknown) => e);
    expect(isAuthError(wrong)).toBe(true);
    expect((wrong as Error).message).toContain(etcd.endpoints[0]!);
    let client: Leasehold | undefined;
    try {
      client = await connect({
        endpoints: etcd.endpoints,
        auth: { username: 'root', password: 'root-pw' },
      });
      const lock = await client.acquire('with-auth');
      expect(lock.token > 0n).toBe(true);
      await lock.release();
    } finally {
      await client?.close();
    }
  });
});

describe('cluster identity', () => {
  it('a snapshot restore with the same member settings (same cluster id) ends every session with ClusterChangedError', async () => {
    await using etcd = await own();
    const lockPrefix = uniquePrefix('restore');
    const admin = etcdClient(etcd.endpoints);
    try {
      await using client = await connect({
        endpoints: etcd.endpoints,
        lockPrefix,
        callTimeoutMs: 1_000,
        recheckIntervalMs: 500,
        session: { ttlSeconds: 30 },
      });
      onCleanup(client, () => {});
      const early = await client.acquire('early');
      const snapshot = await etcd.members[0]!.snapshot();
      for (let i = 0; i < 20; i++) await admin.put(`${lockPrefix}filler`).value(String(i));
      const lock = await client.acquire('late');
      const clusterId = client.clusterId;
      await etcd.restore(snapshot);
      // Same cluster id, fewer revisions: the holder must not believe it still holds.
      await waitFor(() => !lock.isHeld && !early.isHeld, {
        timeoutMs: 15_000,
        what: 'holders learn that history was rewound',
      });
      expect(isClusterChangedError(lock.session.signal.reason)).toBe(true);
      const again = await client.acquire('after').catch((e: unknown) => e);
      expect(isClusterChangedError(again)).toBe(true);
      // A new client of the restored cluster works, under the same cluster id, with lower tokens.
      await using fresh = await connect({ endpoints: etcd.endpoints, lockPrefix });
      expect(fresh.clusterId).toBe(clusterId);
      const newer = await fresh.acquire('late');
      expect(newer.token < lock.token).toBe(true);
      await newer.release();
    } finally {
      admin.close();
    }
  }, 60_000);
});
