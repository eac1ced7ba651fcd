/**
 * close() is bounded: each session's revoke gets one call with one deadline (callTimeoutMs, or
 * the lease's remaining time if shorter), also when etcd is unreachable but the connection stays
 * open (a stalled network, a SIGSTOPped member), so a process that closes its client on shutdown
 * exits promptly.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { connect } from '@leasehold/core';
import { startEtcd, TcpFaultProxy } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { onCleanup, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();

describe('close() is bounded by callTimeoutMs', () => {
  it('with the network stalled, close() of a client holding a lock returns within callTimeoutMs (+1 s slack)', async () => {
    const callTimeoutMs = 2_000;
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    const client = await connect({
      endpoints: [proxy.url],
      lockPrefix: uniquePrefix('close-stall'),
      callTimeoutMs,
    });
    onCleanup(client, () => {});
    await client.acquire('job');
    proxy.setMode('stall');
    const started = performance.now();
    await waitFor(() => client.close().then(() => true), {
      timeoutMs: 30_000,
      what: 'close() returns',
    });
    const tookMs = performance.now() - started;
    console.log(
      `[close-stall] close() took ${tookMs.toFixed(0)} ms with callTimeoutMs ${callTimeoutMs}`,
    );
    expect(tookMs).toBeLessThan(callTimeoutMs + 1_000);
  }, 60_000);

  it('a process holding a lock with default options exits within callTimeoutMs (+1 s) of close() while its etcd member is SIGSTOPped', async () => {
    await using etcd = await startEtcd({ provider: 'local' });
    const script = fileURLToPath(new URL('./workers/close-deadline-worker.mjs', import.meta.url));
    const child = spawn(process.execPath, [script, etcd.endpoints.join(','), '{}'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const exited = once(child, 'exit');
    try {
      const lines = createInterface({ input: child.stdout });
      const next = () => once(lines, 'line').then(([line]) => line as string);
      expect(await waitFor(() => next(), { timeoutMs: 15_000, what: 'child holds' })).toBe('held');
      await etcd.members[0]!.pause();
      const asked = performance.now();
      child.stdin.write('close\n');
      await waitFor(() => exited, { timeoutMs: 40_000, what: 'child exits' });
      const tookMs = performance.now() - asked;
      console.log(
        `[close-paused] child exited ${tookMs.toFixed(0)} ms after close() was asked (callTimeoutMs 5000)`,
      );
      expect(tookMs).toBeLessThan(5_000 + 1_000);
    } finally {
      child.kill('SIGKILL');
      await etcd.members[0]!.resume().catch(() => {});
    }
  }, 90_000);
});
