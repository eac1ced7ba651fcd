/**
 * @leasehold/cron under faults it must survive without wedging a job or running code after it
 * was told to stop: a claim whose answer is lost but which lands later, stop() while a claim is
 * in flight, and a client closed without stop().
 */
import { connect } from '@leasehold/core';
import { createScheduler, type RunContext } from '@leasehold/cron';
import { startEtcd, TcpFaultProxy } from '@leasehold/testing';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

describe('@leasehold/cron under faults', () => {
  it('a claim cut off from etcd for longer than its retries does not block the job once healed', async () => {
    await using etcd = await startEtcd({ provider: 'local' });
    const proxy = await TcpFaultProxy.start({ target: etcd.endpoints[0]! });
    const prefix = uniquePrefix('cron-stall');
    // A lease that outlives the stall: only the claim's own calls give up.
    await using a = await connect({ endpoints: [proxy.url], session: { ttlSeconds: 60 } });
    await using b = await connect({ endpoints: etcd.endpoints, session: { ttlSeconds: 60 } });
    const sa = await createScheduler(a, { prefix, runner: 'A' });
    const sb = await createScheduler(b, { prefix, runner: 'B' });
    const runs: { runner: string; fire: string }[] = [];
    const job = (runner: string) => (ctx: RunContext) =>
      void runs.push({ runner, fire: ctx.fireTime.toISOString() });
    const errors: string[] = [];
    sa.onError((e) => errors.push(e.error.name));
    try {
      sa.schedule('j', { everyMs: 2000 }, job('A'), { overlap: 'skip' });
      await waitFor(() => runs.length >= 1, { what: 'a first run on A' });
      proxy.setMode('stall');
      await waitFor(() => errors.includes('EtcdUnavailableError'), {
        timeoutMs: 40_000,
        what: "A's claim gives up",
      });
      proxy.setMode('pass');
      sb.schedule('j', { everyMs: 2000 }, job('B'), { overlap: 'skip' });
      const healedAt = runs.length;
      await waitFor(() => runs.length >= healedAt + 4, {
        timeoutMs: 30_000,
        what: 'four more fires run after the heal',
      });
      await waitFor(
        async () =>
          (await sb.history('j', { limit: 50 })).every(
            (h) => h.outcome !== 'running' || Date.now() - h.fireTime.getTime() < 5_000,
          ),
        { timeoutMs: 20_000, what: 'no old record left running' },
      );
      const fires = runs.map((r) => r.fire);
      expect(new Set(fires).size).toBe(fires.length);
    } finally {
      await Promise.all([sa.stop({ drainMs: 0 }), sb.stop({ drainMs: 0 })]);
      await proxy.close();
    }
  }, 120_000);

  it('stop() while a claim is in flight: the job function is never called after stop() returned', async () => {
    await using etcd = await startEtcd({ provider: 'local' });
    const proxy = await TcpFaultProxy.start({ target: etcd.endpoints[0]! });
    await using client = await connect({ endpoints: [proxy.url], session: { ttlSeconds: 60 } });
    const s = await createScheduler(client, { prefix: uniquePrefix('cron-stop-claim') });
    let stopped = false;
    const calledAfterStop: string[] = [];
    s.schedule('j', '* * * * * *', ({ fireTime }) => {
      if (stopped) calledAfterStop.push(fireTime.toISOString());
    });
    await waitFor(async () => (await s.history('j')).length >= 1, { what: 'a first fire' });
    // The claim of the next fire goes out into a stalled connection and settles after stop().
    proxy.setMode('stall');
    let settled = 0;
    s.onClaimed(() => settled++);
    s.onError(() => settled++);
    const next = s.next('j')!.getTime();
    await waitFor(() => Date.now() > next + 300, { what: 'the next fire is due' });
    await s.stop({ drainMs: 300 });
    stopped = true;
    proxy.setMode('pass');
    await waitFor(() => settled > 0, { timeoutMs: 30_000, what: 'the stalled claim settles' });
    expect(calledAfterStop).toEqual([]);
    await proxy.close();
  }, 60_000);

  it('a process that closes its client without stop() exits', async () => {
    const script = `
      import { connect } from '@leasehold/core';
      import { createScheduler } from '@leasehold/cron';
      const client = await connect({ endpoints: ${JSON.stringify(sharedEndpoints())} });
      const s = await createScheduler(client, { prefix: ${JSON.stringify(uniquePrefix('cron-close'))} });
      let ran;
      const first = new Promise((resolve) => (ran = resolve));
      s.schedule('j', '* * * * * *', () => ran());
      await first;
      await client.close();
      console.log('closed');
    `;
    const cwd = fileURLToPath(new URL('..', import.meta.url));
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      const { code } = await waitFor(() => exited.then((c) => ({ code: c })), {
        timeoutMs: 20_000,
        what: 'the process exits by itself',
      });
      expect(code).toBe(0);
      expect(out.trim()).toBe('closed');
    } finally {
      child.kill('SIGKILL');
    }
  });
});
