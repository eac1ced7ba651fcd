/**
 * The first code that runs after a pause sees the loss: the `signal` withLock hands to `fn`,
 * kept from before a synchronous stall past the TTL while another process took the lock, says
 * aborted on its first read (and throwIfAborted() throws), before any timer has run.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { connect } from '@leasehold/core';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());
const script = fileURLToPath(new URL('./workers/acquire-worker.mjs', import.meta.url));

describe('withLock after an event-loop stall', () => {
  it("fn's signal says aborted, in the first code after a stall past the TTL, once another process holds", async () => {
    const lockPrefix = uniquePrefix('withlock-stall');
    await using client = await connect({ endpoints, lockPrefix, session: { ttlSeconds: 2 } });
    const child = spawn(process.execPath, [script, endpoints.join(','), lockPrefix, 'job'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines: Record<string, unknown>[] = [];
    createInterface({ input: child.stdout }).on('line', (l) =>
      lines.push(JSON.parse(l) as Record<string, unknown>),
    );
    try {
      const seen = await client.withLock('job', async ({ signal, lock }) => {
        await waitFor(
          async () => (await admin.getAll().prefix(`${lockPrefix}job/`).keys()).length === 2,
          {
            what: 'the other process waits',
          },
        );
        const until = performance.now() + 6_000; // TTL 2 s: the lease expires, the other process takes over
        while (performance.now() < until) {
          // a synchronous stall
        }
        const at = performance.timeOrigin + performance.now();
        let threw = false;
        try {
          signal.throwIfAborted();
        } catch {
          threw = true;
        }
        return { at, ctxAborted: signal.aborted, threw, isHeld: lock.isHeld };
      });
      const other = await waitFor(() => lines.find((l) => 'acquiredAt' in l), {
        what: 'the other process reports its hold',
      });
      console.log(
        `[withlock-stall] first code after the stall: ctx.signal.aborted=${seen.ctxAborted}, throwIfAborted threw=${seen.threw}, lock.isHeld=${seen.isHeld}; the other process acquired ${(seen.at - (other.acquiredAt as number)).toFixed(0)} ms before (token ${String(other.token)})`,
      );
      expect((other.acquiredAt as number) < seen.at).toBe(true); // the precondition
      expect(seen.ctxAborted).toBe(true);
      expect(seen.threw).toBe(true);
    } finally {
      child.stdin.write('release\n');
      child.kill('SIGKILL');
    }
  }, 40_000);
});
