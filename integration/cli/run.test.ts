/**
 * `leasehold run` as operators use it: real leasehold processes against the run's etcd, each
 * running a command that reports its start, the token it was handed, the signals it gets and
 * its end (workers/child.mjs).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { connect } from '@leasehold/core';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { assertNoOverlap, child, cleanUpAfter, Cli, now, Probe, runCli } from './harness.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());
const keysUnder = (prefix: string) => admin.getAll().prefix(prefix).keys();

/** `leasehold run` on the shared etcd with its own lock prefix. */
const run = (prefix: string, args: string[], env: Record<string, string> = {}) =>
  new Cli(['run', '--endpoints', endpoints.join(','), '--lock-prefix', prefix, ...args], env);

describe('leasehold run', () => {
  it('two runs on one lock never overlap, and the second gets a higher token', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-run-overlap'));
    await using probe = await Probe.start();
    const a = run(prefix, ['--lock', 'nightly', '--', ...child()], probe.env('a'));
    const childA = await probe.started('a');
    const b = run(prefix, ['--lock', 'nightly', '--', ...child()], probe.env('b'));
    await waitFor(async () => (await keysUnder(`${prefix}nightly/`)).length === 2, {
      what: 'b queued behind a',
    });
    expect(probe.named('b')).toBeUndefined(); // b waits while a runs
    childA.exit(0);
    const childB = await probe.started('b');
    childB.exit(0);
    expect((await a.exit()).code).toBe(0);
    expect((await b.exit()).code).toBe(0);
    await childB.closed();
    assertNoOverlap([childA, childB]);
    expect(childB.token).toBeGreaterThan(childA.token);
    expect(childA.start.key).toMatch(new RegExp(`^${prefix}nightly/[0-9a-f]+$`));
    expect(await keysUnder(prefix)).toEqual([]); // both released
  });

  it('four runs started at once take turns: no two commands overlap, tokens grow in turn order', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-run-four'));
    await using probe = await Probe.start();
    const names = ['w1', 'w2', 'w3', 'w4'];
    const clis = names.map((name) =>
      run(prefix, ['--lock', 'deploy', '--ttl', '5', '--', ...child()], {
        ...probe.env(name, { EXIT_AFTER_MS: '150' }),
      }),
    );
    const exits = await Promise.all(clis.map((cli) => cli.exit(30_000)));
    expect(exits.map((e) => e.code)).toEqual([0, 0, 0, 0]);
    await Promise.all(names.map(async (name) => (await probe.started(name)).closed()));
    const inOrder = assertNoOverlap(probe.children);
    const tokens = inOrder.map((c) => c.token);
    expect(tokens).toEqual([...tokens].sort((x, y) => (x < y ? -1 : 1)));
    expect(new Set(tokens).size).toBe(4);
  });

  it('--no-wait exits 80 naming the holder; --wait-timeout exits 81; neither runs the command or leaves a key', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-run-taken'));
    await using probe = await Probe.start();
    const holder = run(
      prefix,
      ['--lock', 'job', '--value', 'host-a:42', '--', ...child()],
      probe.env('holder'),
    );
    const held = await probe.started('holder');

    const taken = await runCli(
      [
        'run',
        '--endpoints',
        endpoints.join(','),
        '--lock-prefix',
        prefix,
        '--lock',
        'job',
        '--no-wait',
        '--',
        ...child(),
      ],
      probe.env('taken'),
    );
    expect(taken.code).toBe(80);
    expect(taken.stderr).toBe(
      `leasehold: lock "job" is held by "host-a:42" ${held.start.key} (token ${held.token})\n`,
    );

    const started = now();
    const late = await runCli(
      [
        'run',
        '--endpoints',
        endpoints.join(','),
        '--lock-prefix',
        prefix,
        '--lock',
        'job',
        '--wait-timeout',
        '700',
        '--',
        ...child(),
      ],
      probe.env('late'),
    );
    expect(late.code).toBe(81);
    expect(late.stderr).toBe(
      'leasehold: lock "job" was not acquired within 700 ms (--wait-timeout)\n',
    );
    expect(now() - started).toBeGreaterThanOrEqual(700);

    expect(probe.named('taken')).toBeUndefined();
    expect(probe.named('late')).toBeUndefined();
    expect(await keysUnder(`${prefix}job/`)).toEqual([held.start.key]);
    held.exit(0);
    expect((await holder.exit()).code).toBe(0);
  });

  it("exit codes propagate: the command's code, 128+N when a signal ended it, 127 when it is not found", async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-run-codes'));
    await using probe = await Probe.start();
    const seven = run(
      prefix,
      ['--lock', 'c', '--', ...child()],
      probe.env('seven', { EXIT_AFTER_MS: '1', EXIT_CODE: '7' }),
    );
    expect((await seven.exit()).code).toBe(7);

    const killed = run(prefix, ['--lock', 'c', '--', ...child()], probe.env('killed'));
    process.kill((await probe.started('killed')).start.pid, 'SIGKILL');
    expect((await killed.exit()).code).toBe(137);
    expect(killed.stderr).toBe('');

    const missing = await runCli([
      'run',
      '--endpoints',
      endpoints.join(','),
      '--lock-prefix',
      prefix,
      '--lock',
      'c',
      '--',
      'no-such-command-here',
    ]);
    expect(missing.code).toBe(127);
    expect(missing.stderr).toBe('leasehold: command not found: no-such-command-here\n');
    expect(await keysUnder(prefix)).toEqual([]); // released every time
  });

  it('forwards SIGHUP, SIGINT and SIGTERM to the command once each; a command killed by one exits 128+N', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-run-signals'));
    await using probe = await Probe.start();
    const cli = run(
      prefix,
      ['--lock', 's', '--', ...child()],
      probe.env('c', { DIE_ON: 'SIGTERM' }),
    );
    const c = await probe.started('c');
    cli.signal('SIGHUP');
    await waitFor(() => c.signals().includes('SIGHUP'), { what: 'SIGHUP forwarded' });
    cli.signal('SIGINT');
    await waitFor(() => c.signals().includes('SIGINT'), { what: 'SIGINT forwarded' });
    expect(cli.alive).toBe(true); // leasehold itself is not interrupted while the command runs
    cli.signal('SIGTERM');
    const exit = await cli.exit();
    expect(exit.code).toBe(143);
    expect(c.signals()).toEqual(['SIGHUP', 'SIGINT', 'SIGTERM']);
    expect(await keysUnder(prefix)).toEqual([]);
  });

  it('SIGINT while waiting for the lock withdraws from the queue and exits 130', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-run-interrupt'));
    await using probe = await Probe.start();
    await using client = await connect({ endpoints, lockPrefix: prefix });
    const lock = await client.acquire('w');
    const cli = run(prefix, ['--lock', 'w', '--', ...child()], probe.env('never'));
    await waitFor(async () => (await keysUnder(`${prefix}w/`)).length === 2, { what: 'queued' });
    cli.signal('SIGINT');
    const exit = await cli.exit();
    expect(exit.code).toBe(130);
    expect(cli.stderr).toBe('leasehold: interrupted by SIGINT\n');
    expect(await keysUnder(`${prefix}w/`)).toEqual([lock.key]);
    expect(probe.named('never')).toBeUndefined();
    await lock.release();
  });
});

const etcdctl = process.env.ETCDCTL_BIN ?? 'etcdctl';
const haveEtcdctl = spawnSync(etcdctl, ['version']).status === 0;

describe.skipIf(!haveEtcdctl)('with etcdctl lock (Go concurrency.Mutex)', () => {
  it('etcdctl lock on the same name waits while leasehold run holds it, and gets it only after the command ended', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-etcdctl'));
    await using probe = await Probe.start();
    const cli = run(prefix, ['--lock', 'shared', '--', ...child()], probe.env('ours'));
    const ours = await probe.started('ours');
    const waiter = spawn(etcdctl, ['--endpoints', endpoints.join(','), 'lock', `${prefix}shared`], {
      env: { ...process.env, ETCDCTL_API: '3' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      let acquiredAt: number | undefined;
      createInterface({ input: waiter.stdout }).once('line', () => (acquiredAt = now()));
      // etcdctl has joined the queue: its key exists behind ours.
      await waitFor(async () => (await keysUnder(`${prefix}shared/`)).length === 2, {
        what: 'etcdctl queued',
      });
      expect(acquiredAt).toBeUndefined();
      ours.exit(0);
      expect((await cli.exit()).code).toBe(0);
      const at = await waitFor(() => acquiredAt, { what: 'etcdctl acquired' });
      expect(at).toBeGreaterThanOrEqual(ours.endAt!);
    } finally {
      const gone = new Promise((resolve) => waiter.once('exit', resolve));
      waiter.kill('SIGINT');
      await gone;
    }
  });
});
