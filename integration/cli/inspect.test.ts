/**
 * `leasehold inspect` reports what the SDK sees, and `leasehold unlock` removes one stuck key,
 * guarded by its create revision.
 */
import { connect, isLockLostError } from '@leasehold/core';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { child, cleanUpAfter, Cli, Probe, runCli } from './harness.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

interface MemberJson {
  key: string;
  value: string;
  token: string;
  leaseId: string;
  ttlSeconds: number | null;
}
interface Report {
  lockPrefix: string;
  electionPrefix: string;
  locks: { name: string; holder: MemberJson; waiters: MemberJson[] }[];
  elections: { name: string; leader: MemberJson; candidates: MemberJson[] }[];
}

describe('leasehold inspect', () => {
  it('--json shows the holder, value, token and lease the SDK sees, waiters and candidates in order', async () => {
    const lockPrefix = cleanUpAfter(uniquePrefix('cli-inspect-l'));
    const electionPrefix = cleanUpAfter(uniquePrefix('cli-inspect-e'));
    const connection = [
      '--endpoints',
      endpoints.join(','),
      '--lock-prefix',
      lockPrefix,
      '--election-prefix',
      electionPrefix,
    ];
    await using probe = await Probe.start();
    const holder = new Cli(
      [
        'run',
        '--lock',
        'jobs/nightly',
        '--value',
        'host-a nightly',
        '--ttl',
        '30',
        ...connection,
        '--',
        ...child(),
      ],
      probe.env('holder'),
    );
    await probe.started('holder');
    await using sdk = await connect({ endpoints, lockPrefix, electionPrefix });
    const waiting = sdk.acquire('jobs/nightly', { value: 'waiter-1' });
    await using other = await connect({
      endpoints,
      lockPrefix,
      electionPrefix,
      session: { ttlSeconds: 20 },
    });
    const leadership = await sdk.campaign('sched', 'leader-value');
    const candidate = other.campaign('sched', 'candidate-value');
    const deploy = await sdk.acquire('deploy', { value: 'deployer' });
    await waitFor(async () => (await admin.getAll().prefix(lockPrefix).keys()).length === 3, {
      what: 'holder, waiter and a second lock',
    });
    await waitFor(async () => (await admin.getAll().prefix(electionPrefix).keys()).length === 2, {
      what: 'leader and candidate',
    });

    const { code, stdout, stderr } = await runCli(['inspect', '--json', ...connection]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    const report = JSON.parse(stdout) as Report;
    expect(report.lockPrefix).toBe(lockPrefix);
    expect(report.locks.map((l) => l.name)).toEqual(['deploy', 'jobs/nightly']);

    const seen = (await sdk.holder('jobs/nightly'))!;
    const nightly = report.locks[1]!;
    expect(nightly.holder).toMatchObject({
      key: seen.key,
      value: 'host-a nightly',
      token: seen.token.toString(),
      leaseId: seen.leaseId.toString(16),
    });
    expect(seen.value).toBe('host-a nightly');
    expect(nightly.holder.ttlSeconds).toBeGreaterThan(0);
    expect(nightly.holder.ttlSeconds).toBeLessThanOrEqual(30);
    expect(nightly.waiters.map((w) => w.value)).toEqual(['waiter-1']);
    expect(BigInt(nightly.waiters[0]!.token)).toBeGreaterThan(seen.token);
    expect(nightly.waiters[0]!.ttlSeconds).toBeLessThanOrEqual(10);

    const leader = (await sdk.leader('sched'))!;
    expect(report.elections).toEqual([
      {
        name: 'sched',
        leader: {
          key: leader.key,
          value: 'leader-value',
          token: leadership.token.toString(),
          leaseId: leader.leaseId.toString(16),
          ttlSeconds: expect.any(Number) as number,
        },
        candidates: [expect.objectContaining({ value: 'candidate-value' }) as MemberJson],
      },
    ]);

    // --prefix keeps names that start with it.
    const only = JSON.parse(
      (await runCli(['inspect', '--prefix', 'jobs/', ...connection])).stdout,
    ) as Report;
    expect(only.locks.map((l) => l.name)).toEqual(['jobs/nightly']);
    expect(only.elections).toEqual([]);

    // The table (forced: stdout is not a terminal here) has the same facts.
    const table = await runCli(['inspect', '--table', ...connection]);
    expect(table.stdout).toContain(`LOCKS under ${lockPrefix}`);
    expect(table.stdout).toMatch(
      new RegExp(
        `^jobs/nightly +"host-a nightly" +${seen.token} +${seen.leaseId.toString(16)} +\\d+s +1$`,
        'm',
      ),
    );
    expect(table.stdout).toMatch(/^ {2}#1 +"waiter-1" +\d+ /m);
    expect(table.stdout).toMatch(/^sched +"leader-value" +\d+ /m);

    await leadership.resign();
    await (await candidate).resign();
    probe.named('holder')!.exit(0);
    expect((await holder.exit()).code).toBe(0);
    await (await waiting).release();
    await deploy.release();
  });
});

describe('leasehold unlock', () => {
  it('removes a stuck holder key guarded by its token; the holder sees its lock lost; a second try finds nothing (83)', async () => {
    const lockPrefix = cleanUpAfter(uniquePrefix('cli-unlock'));
    const connection = ['--endpoints', endpoints.join(','), '--lock-prefix', lockPrefix];
    // A holder whose lease would outlive an operator's patience.
    await using stuck = await connect({ endpoints, lockPrefix, session: { ttlSeconds: 3600 } });
    const lock = await stuck.acquire('deploy', { value: 'web-3:4711' });
    await using waiterClient = await connect({ endpoints, lockPrefix });
    const next = waiterClient.acquire('deploy', { timeoutMs: 20_000 });

    const hex = lock.session.leaseId.toString(16);
    const removed = await runCli(['unlock', 'deploy', '--key', hex, '--yes', ...connection]);
    expect(removed.stderr).toBe('');
    expect(removed.stdout).toBe(
      `removed ${lock.key} (lock "deploy", the holder, value "web-3:4711", token ${lock.token}, lease ${hex})\n`,
    );
    expect(removed.code).toBe(0);
    await waitFor(() => lock.signal.aborted, { what: 'the holder saw its lock lost' });
    expect(isLockLostError(lock.signal.reason) && lock.signal.reason.reason).toBe('deleted');
    const taken = await next;
    expect(taken.token).toBeGreaterThan(lock.token);

    const again = await runCli(['unlock', 'deploy', '--key', lock.key, '--yes', ...connection]);
    expect(again.code).toBe(83);
    expect(again.stderr).toBe(`leasehold: no key ${lock.key} (lock "deploy"): nothing removed\n`);

    const wrong = await runCli([
      'unlock',
      'deploy',
      '--key',
      `${lockPrefix}other/${hex}`,
      '--yes',
      ...connection,
    ]);
    expect(wrong.code).toBe(64);
    expect(wrong.stderr.split('\n')).toHaveLength(2);
    expect(await admin.get(taken.key).string()).toBe(taken.value); // the new holder is untouched
    await taken.release();
  });
});
