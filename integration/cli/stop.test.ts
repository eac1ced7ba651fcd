/**
 * How the command is stopped when leasehold cannot simply run it to its end: its keeper killed,
 * leasehold frozen with a command slow to shut down, a shell wrapper whose leader exits at once,
 * and a partition that must cost exactly one line on stderr. Each checks, where it applies, that
 * the command never runs alongside the next holder's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { TcpFaultProxy } from '@leasehold/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { assertNoOverlap, child, childScript, cleanUpAfter, Cli, now, Probe } from './harness.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());
const keysUnder = (prefix: string) => admin.getAll().prefix(prefix).keys();

/** `leasehold run --lock job` with `args` (ending with `-- command…`). */
const run = (prefix: string, args: string[], env: Record<string, string>, via = endpoints) =>
  new Cli(
    ['run', '--endpoints', via.join(','), '--lock-prefix', prefix, '--lock', 'job', ...args],
    env,
  );

/** The pid of `parent`'s keeper process, read from /proc. */
function keeperOf(parent: number): number | undefined {
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== parent) continue;
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('keeper.js')) return Number(pid);
    } catch {
      // It exited while we looked.
    }
  }
  return undefined;
}

describe('stopping the command', () => {
  it('the keeper is killed (SIGKILL) while another run waits: leasehold kills the command group before it releases, exit 84, no overlap', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-stop-keeper'));
    await using probe = await Probe.start();
    // `a` ignores SIGTERM: only a SIGKILL of its group ends it.
    const a = run(prefix, ['--ttl', '5', '--', ...child()], probe.env('a', { DIE_ON: '' }));
    const childA = await probe.started('a');
    const b = run(
      prefix,
      ['--ttl', '5', '--', ...child()],
      probe.env('b', { EXIT_AFTER_MS: '200' }),
    );
    await waitFor(async () => (await keysUnder(`${prefix}job/`)).length === 2, {
      what: 'b queued behind a',
    });
    const keeper = await waitFor(() => keeperOf(a.pid), { what: "a's keeper" });
    process.kill(keeper, 'SIGKILL');
    expect((await a.exit()).code).toBe(84);
    expect(a.stderr).toMatch(
      /^leasehold: the keeper process ended unexpectedly \(SIGKILL\); the command \(process group \d+\) was killed \(SIGKILL\)\n$/,
    );
    const childB = await probe.started('b');
    expect((await b.exit()).code).toBe(0);
    await childA.closed();
    await childB.closed();
    assertNoOverlap([childA, childB]);
    expect(childA.signals()).toEqual([]); // SIGKILL only
    expect(childB.token).toBeGreaterThan(childA.token);
  });

  it('leasehold is frozen (SIGSTOP), --ttl 3 --grace 2000, the command takes 1.5 s to exit after SIGTERM: it is gone before the next holder starts', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-stop-frozen-slow'));
    await using probe = await Probe.start();
    const a = run(
      prefix,
      ['--ttl', '3', '--grace', '2000', '--', ...child()],
      probe.env('a', { STOP_DELAY_MS: '1500' }),
    );
    const childA = await probe.started('a');
    const b = run(
      prefix,
      ['--ttl', '3', '--', ...child()],
      probe.env('b', { EXIT_AFTER_MS: '200' }),
    );
    await waitFor(async () => (await keysUnder(`${prefix}job/`)).length === 2, {
      what: 'b queued behind a',
    });
    // When etcd deletes a's key (its lease expired) the lock passes on: a must be gone by then.
    const watcher = await admin.watch().key(childA.start.key!).create();
    let deletedAt: number | undefined;
    watcher.on('delete', () => (deletedAt ??= now()));
    a.signal('SIGSTOP');
    const childB = await probe.started('b');
    await childA.closed();
    await waitFor(() => deletedAt, { what: "a's key deleted" });
    await watcher.cancel();
    expect(childA.closedAt!).toBeLessThanOrEqual(deletedAt!);
    expect(a.alive).toBe(true); // still frozen: the keeper did it
    expect(childA.signals()).toEqual(['SIGTERM']);
    assertNoOverlap([childA, childB]);
    expect(childB.token).toBeGreaterThan(childA.token);
    a.signal('SIGCONT');
    expect((await a.exit()).code).toBe(82);
    expect(a.stderr).toMatch(/^leasehold: lock "job" \(token \d+\) lost: /);
    expect((await b.exit()).code).toBe(0);
  });

  it('the keeper is frozen (SIGSTOP of its pid) when the lock is lost: leasehold stops the command itself, exit 82', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-stop-keeper-frozen'));
    await using probe = await Probe.start();
    const [ttlS, graceMs] = [3, 1_000];
    const a = run(
      prefix,
      ['--ttl', String(ttlS), '--grace', String(graceMs), '--', ...child()],
      probe.env('a', { DIE_ON: '' }),
    );
    const childA = await probe.started('a');
    const keeper = await waitFor(() => keeperOf(a.pid), { what: "a's keeper" });
    process.kill(keeper, 'SIGSTOP');
    try {
      const lostAt = now();
      await admin.delete().key(childA.start.key!);
      // leasehold waits for the keeper's answer (2 × 3 ticks of TTL/20, at most 1.5 s), then
      // sends SIGTERM, and SIGKILL a grace later (the command ignores SIGTERM).
      const answerMs = 2 * 3 * Math.max(50, Math.min(250, (ttlS * 1000) / 20));
      const endedAt = await childA.closed(answerMs + graceMs + 10_000);
      expect(endedAt - lostAt).toBeLessThanOrEqual(answerMs + graceMs + 1_000);
      expect(endedAt - lostAt).toBeGreaterThanOrEqual(answerMs + graceMs - 50);
      expect(childA.signals()).toEqual(['SIGTERM']);
      // leasehold exits without waiting for the keeper (which still holds its stdout and
      // stderr open, so the harness's 'close' comes only once the keeper is gone).
      const code = await waitFor(() => a.proc.exitCode ?? undefined, { what: 'leasehold exits' });
      expect(code).toBe(82);
    } finally {
      process.kill(keeper, 'SIGCONT');
    }
    await a.exit();
    expect(a.stderr).toMatch(
      /leasehold: the keeper process \(pid \d+\) did not answer; stopping the command \(process group \d+\) from leasehold \(SIGTERM, then SIGKILL after 1s\)\n$/,
    );
    // Let go of, it sees leasehold gone and exits.
    await waitFor(
      () => {
        try {
          process.kill(keeper, 0);
          return undefined;
        } catch {
          return true;
        }
      },
      { what: 'the keeper exits once resumed' },
    );
  });

  it('--grace holds for the rest of the group when a shell wrapper exits at SIGTERM: the child finishes its clean-up', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-stop-wrapper'));
    await using probe = await Probe.start();
    const script = `"${process.execPath}" "${childScript}"; echo after`;
    const cli = run(
      prefix,
      ['--grace', '2000', '--', 'sh', '-c', script],
      probe.env('c', { STOP_DELAY_MS: '300' }),
    );
    const c = await probe.started('c');
    await admin.delete().key(c.start.key!);
    await c.closed();
    const term = c.events.find((e) => e.signal === 'SIGTERM');
    const end = c.events.find((e) => e.event === 'end');
    expect(term, 'SIGTERM came first').toBeDefined();
    expect(end, 'the child ended by itself after its clean-up, not by SIGKILL').toBeDefined();
    expect(end!.at - term!.at).toBeGreaterThanOrEqual(290);
    expect((await cli.exit()).code).toBe(82);
    expect(cli.stderr).toMatch(
      /^leasehold: lock "job" \(token \d+\) lost: its key was deleted by someone else; stopping the command \(SIGTERM, then SIGKILL after 2s\)\n$/,
    );
  });

  it.each(['reset', 'stall'] as const)(
    'a partition (proxy %s) while the command runs costs one line on stderr: no process warnings',
    async (mode) => {
      const prefix = cleanUpAfter(uniquePrefix(`cli-stop-partition-${mode}`));
      await using probe = await Probe.start();
      await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
      const cli = run(
        prefix,
        ['--ttl', '3', '--grace', '200', '--call-timeout', '1000', '--', ...child()],
        probe.env('c'),
        [proxy.url],
      );
      const c = await probe.started('c');
      proxy.setMode(mode);
      await c.closed();
      expect((await cli.exit()).code).toBe(82);
      expect(cli.stderr).toMatch(/^leasehold: lock "job" \(token \d+\) lost: [^\n]*\n$/);
    },
  );
});
