/**
 * A join txn that etcd refused (here: no write permission on the lock prefix) created nothing, so
 * the session's local slot for that lock is free again at once: the next acquire of the same name
 * on that session gets the refusal promptly, not a hang.
 */
import { spawnSync } from 'node:child_process';
import { connect, isEtcdRequestError } from '@leasehold/core';
import { startEtcd } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { onCleanup, uniquePrefix } from '../setup/etcd.js';

describe('a refused join', () => {
  it('the second acquire of the same name on the same session fails promptly with the refusal, not a hang', async () => {
    await using etcd = await startEtcd({ provider: 'binary' });
    const lockPrefix = uniquePrefix('refused');
    const ctl = (...args: string[]) => {
      const run = spawnSync('etcdctl', ['--endpoints', etcd.endpoints[0]!, ...args], {
        env: { ...process.env, ETCDCTL_API: '3' },
        encoding: 'utf8',
      });
      if (run.status !== 0) throw new Error(`etcdctl ${args.join(' ')}: ${run.stderr}`);
    };
    ctl('user', 'add', 'root', '--new-user-password=root-pw');
    ctl('user', 'grant-role', 'root', 'root');
    ctl('role', 'add', 'reader');
    ctl('role', 'grant-permission', 'reader', '--prefix=true', 'read', lockPrefix);
    ctl('user', 'add', 'reader', '--new-user-password=reader-pw');
    ctl('user', 'grant-role', 'reader', 'reader');
    ctl('auth', 'enable');

    await using client = await connect({
      endpoints: etcd.endpoints,
      lockPrefix,
      auth: { username: 'reader', password: 'reader-pw' },
    });
    const reported: string[] = [];
    onCleanup(client, (e) => reported.push(`${e.name}: ${e.message}`));
    const first = await client.acquire('job').catch((e: unknown) => e);
    console.log(`[refused] first acquire: ${(first as Error).name}: ${(first as Error).message}`);
    expect(isEtcdRequestError(first)).toBe(true);

    const started = performance.now();
    const second = await client.acquire('job', { timeoutMs: 5_000 }).catch((e: unknown) => e);
    const tookMs = Math.round(performance.now() - started);
    console.log(
      `[refused] second acquire (timeoutMs 5000): ${(second as Error).name} after ${tookMs} ms; background reports: ${JSON.stringify(reported)}`,
    );
    expect(isEtcdRequestError(second), `second acquire failed with ${(second as Error).name}`).toBe(
      true,
    );
    // A refusal is final: it does not wait out its timeoutMs.
    expect(tookMs).toBeLessThan(5_000);
  }, 60_000);
});
