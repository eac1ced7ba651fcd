/**
 * `leasehold run --permits N` runs commands under a semaphore's permits (LEASEHOLD_SLOT in their
 * environment), and `leasehold inspect` shows semaphores and read/write locks with their holders
 * and waiters.
 */
import { connect } from '@leasehold/core';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { child, cleanUpAfter, Cli, Probe, runCli } from './harness.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());
const keysUnder = (prefix: string) => admin.getAll().prefix(prefix).keys();
const run = (prefix: string, args: string[], env: Record<string, string> = {}) =>
  new Cli(['run', '--endpoints', endpoints.join(','), '--lock-prefix', prefix, ...args], env);

describe('leasehold run --permits', () => {
  it('two of three commands run at once, each with its own slot; the third gets the slot freed first', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-permits'));
    await using probe = await Probe.start();
    const args = ['--permits', '2', '--lock', 'api', '--', ...child()];
    const a = run(prefix, args, probe.env('a'));
    const b = run(prefix, args, probe.env('b'));
    const [childA, childB] = [await probe.started('a'), await probe.started('b')];
    expect(new Set([childA.start.slot, childB.start.slot])).toEqual(new Set(['0', '1']));
    const c = run(prefix, args, probe.env('c'));
    await waitFor(async () => (await keysUnder(`${prefix}api%sem/`)).length === 3, {
      what: 'c queued',
    });
    expect(probe.named('c')).toBeUndefined(); // both permits are held
    childB.exit(0);
    const childC = await probe.started('c');
    expect(childC.start.slot).toBe(childB.start.slot);
    expect(childC.token).toBeGreaterThan(childB.token);
    expect(childC.start.key).toMatch(new RegExp(`^${prefix}api%sem/2\\.[0-9a-f]+\\.0$`));
    childA.exit(0);
    childC.exit(0);
    for (const cli of [a, b, c]) expect((await cli.exit()).code).toBe(0);
    expect(await keysUnder(`${prefix}api%sem/`)).toEqual([]);
  });

  it('refuses bad permits at the call, other permits than the holders’, and --no-wait on a full semaphore', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-permits-bad'));
    const base = ['run', '--endpoints', endpoints.join(','), '--lock-prefix', prefix];
    for (const bad of ['0', '-1', '2.5', '10001', 'x']) {
      const { code, stderr } = await runCli([
        ...base,
        '--permits',
        bad,
        '--lock',
        'p',
        '--',
        'true',
      ]);
      expect(code).toBe(64);
      expect(stderr).toContain(`--permits must be a whole number from 1 to 10000, got "${bad}"`);
    }
    await using probe = await Probe.start();
    const holder = run(prefix, ['--permits', '1', '--lock', 'p', '--', ...child()], probe.env('h'));
    const held = await probe.started('h');
    const other = await runCli([...base, '--permits', '3', '--lock', 'p', '--', 'true']);
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain('is in use with permits 1; this call asked for permits 3');
    const full = await runCli([
      ...base,
      '--permits',
      '1',
      '--no-wait',
      '--lock',
      'p',
      '--',
      'true',
    ]);
    expect(full.code).toBe(80);
    expect(full.stderr).toContain('all 1 permits of semaphore "p" are taken');
    held.exit(0);
    expect((await holder.exit()).code).toBe(0);
    expect(await keysUnder(prefix)).toEqual([]);
  });
});

interface Member {
  key: string;
  value: string;
  token: string;
  leaseId: string;
  ttlSeconds: number | null;
}

describe('leasehold inspect', () => {
  it('shows semaphores (limit, holders with slots, waiters) and read/write locks (holders and waiters with modes), not as locks', async () => {
    const lockPrefix = cleanUpAfter(uniquePrefix('cli-inspect-sem'));
    await using client = await connect({ endpoints, lockPrefix });
    const permits = [
      await client.acquirePermit('api', { permits: 2, value: 'p0' }),
      await client.acquirePermit('api', { permits: 2, value: 'p1' }),
    ];
    const waiting = client.acquirePermit('api', { permits: 2, value: 'p2' });
    const reader = await client.acquireRead('db', { value: 'r0' });
    const writer = client.acquireWrite('db', { value: 'w0' });
    const lock = await client.acquire('plain', { value: 'l0' });
    await waitFor(async () => (await keysUnder(lockPrefix)).length >= 7, { what: 'all queued' });
    const { code, stdout } = await runCli([
      'inspect',
      '--json',
      '--endpoints',
      endpoints.join(','),
      '--lock-prefix',
      lockPrefix,
    ]);
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as {
      locks: { name: string }[];
      semaphores: {
        name: string;
        permits: number;
        holders: (Member & { slot: number | null })[];
        waiters: Member[];
      }[];
      rwLocks: {
        name: string;
        holders: (Member & { mode: string })[];
        waiters: (Member & { mode: string })[];
      }[];
    };
    expect(report.locks.map((l) => l.name)).toEqual(['plain']);
    expect(report.semaphores).toMatchObject([
      {
        name: 'api',
        permits: 2,
        holders: [
          { slot: 0, value: 'p0', token: permits[0]!.token.toString() },
          { slot: 1, value: 'p1', token: permits[1]!.token.toString() },
        ],
        waiters: [{ value: 'p2' }],
      },
    ]);
    expect(report.rwLocks).toMatchObject([
      {
        name: 'db',
        holders: [{ mode: 'read', value: 'r0', token: reader.token.toString() }],
        waiters: [{ mode: 'write', value: 'w0' }],
      },
    ]);
    const table = await runCli([
      'inspect',
      '--table',
      '--endpoints',
      endpoints.join(','),
      '--lock-prefix',
      lockPrefix,
    ]);
    expect(table.stdout).toMatch(/SEMAPHORES under .*\n.*NAME\s+SLOT/);
    expect(table.stdout).toMatch(/api \(2 permits\)\s+0\s+"p0"/);
    expect(table.stdout).toMatch(/READ\/WRITE LOCKS under .*\n.*NAME\s+MODE/);
    for (const p of permits) await p.release();
    await (await waiting).release();
    await reader.release();
    await (await writer).release();
    await lock.release();
  });
});
