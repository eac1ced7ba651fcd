/**
 * Elections shared with `etcdctl elect` (Go's concurrency.Election): the same keys, the same
 * order, the candidate's value on its key. etcdctl prints the leader's key and value (one line
 * each) once elected, and for `-l` on every change of leader or value.
 */
import { connect, type LeaderState, type Leasehold } from '@leasehold/core';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const etcdctl = process.env.ETCDCTL_BIN ?? 'etcdctl';
const available = spawnSync(etcdctl, ['version'], { encoding: 'utf8' }).status === 0;
if (!available)
  console.log(
    `[election-interop] skipped: ${etcdctl} not found; install etcd-client or set ETCDCTL_BIN`,
  );

interface Etcdctl {
  child: ChildProcess;
  /** The next line etcdctl prints, or an error after `ms`. */
  line(ms: number, what: string): Promise<string>;
}

/** Runs `etcdctl elect ARGS` with its output read line by line. */
function elect(...args: string[]): Etcdctl {
  const child = spawn(etcdctl, ['--endpoints', endpoints.join(','), 'elect', ...args], {
    env: { ...process.env, ETCDCTL_API: '3' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  let wake = () => {};
  createInterface({ input: child.stdout }).on('line', (l) => {
    lines.push(l);
    wake();
  });
  return {
    child,
    line: (ms, what) =>
      new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => {
          wake = () => {};
          reject(new Error(`etcdctl ${what}: no line within ${ms} ms`));
        }, ms);
        const take = () => {
          if (lines.length === 0) return;
          clearTimeout(timer);
          wake = () => {};
          resolve(lines.shift()!);
        };
        wake = take;
        take();
      }),
  };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGINT'); // etcdctl resigns (or withdraws its candidacy) on interrupt
  await exited;
}

/** The next state the observer reports. */
async function nextState(states: AsyncIterator<LeaderState>, what: string): Promise<LeaderState> {
  const res = await waitFor(() => states.next(), { timeoutMs: 10_000, what });
  if (res.done) throw new Error(`${what}: the observation ended`);
  return res.value;
}

describe.skipIf(!available)('interop with etcdctl elect (Go concurrency.Election)', () => {
  const admin = etcdClient(endpoints);
  const electionPrefix = uniquePrefix('election-interop');
  let client: Leasehold;
  beforeAll(async () => {
    client = await connect({
      endpoints,
      electionPrefix,
      lockPrefix: uniquePrefix('election-interop-locks'),
    });
  });
  afterAll(async () => {
    await client.close();
    admin.close();
  });
  const keysOf = (election: string) =>
    admin.getAll().prefix(`${electionPrefix}${election}/`).keys();

  it('etcdctl leads → we wait, see its value; once etcdctl is interrupted we are elected', async () => {
    const theirs = elect(`${electionPrefix}shared`, 'from-etcdctl');
    try {
      const key = await theirs.line(10_000, 'elected (key)');
      expect(key.startsWith(`${electionPrefix}shared/`)).toBe(true);
      expect(await theirs.line(2_000, 'elected (value)')).toBe('from-etcdctl');
      const leader = await client.leader('shared');
      expect(leader).toMatchObject({ value: 'from-etcdctl', key });
      expect(leader!.key).toBe(`${electionPrefix}shared/${leader!.leaseId.toString(16)}`);

      const states = client.observe('shared');
      expect((await nextState(states, 'initial state')).leader).toEqual(leader);

      const ours = client.campaign('shared', 'from-leasehold');
      ours.catch(() => {});
      await waitFor(async () => (await keysOf('shared')).length === 2, {
        what: 'our candidacy queued behind etcdctl',
      });
      const early = await Promise.race([
        ours.then(() => 'elected'),
        new Promise((resolve) => setTimeout(() => resolve('waiting'), 1_000)),
      ]);
      expect(early).toBe('waiting');

      await stop(theirs.child);
      const leadership = await waitFor(() => ours, { timeoutMs: 10_000, what: 'we are elected' });
      expect(leadership.token > leader!.token).toBe(true);
      expect(await client.leader('shared')).toMatchObject({
        value: 'from-leasehold',
        token: leadership.token,
      });
      const handover = await nextState(states, 'handover to us');
      expect(handover.leader).toMatchObject({ key: leadership.key, value: 'from-leasehold' });
      await states.return!();
      await leadership.resign();
    } finally {
      await stop(theirs.child);
    }
  });

  it('we lead → etcdctl waits, etcdctl -l sees our values; once we resign etcdctl is elected', async () => {
    const leadership = await client.campaign('shared2', 'ours-1');
    const waiter = elect(`${electionPrefix}shared2`, 'V2');
    const observer = elect('-l', `${electionPrefix}shared2`);
    try {
      await waitFor(async () => (await keysOf('shared2')).length === 2, {
        what: 'etcdctl queued behind us',
      });
      expect(await observer.line(10_000, '-l: key')).toBe(leadership.key);
      expect(await observer.line(2_000, '-l: value')).toBe('ours-1');

      await leadership.proclaim('ours-2');
      expect(await observer.line(5_000, '-l: key after proclaim')).toBe(leadership.key);
      expect(await observer.line(2_000, '-l: value after proclaim')).toBe('ours-2');

      // etcdctl must still be queued after it has had ample time to contend.
      const early = await waiter.line(1_000, 'early').then(
        (line) => `elected: ${line}`,
        () => 'waiting',
      );
      expect(early).toBe('waiting');
      expect(waiter.child.exitCode).toBeNull();

      await leadership.resign();
      const key = await waiter.line(10_000, 'elected after our resign (key)');
      expect(key.startsWith(`${electionPrefix}shared2/`)).toBe(true);
      expect(key).not.toBe(leadership.key);
      expect(await waiter.line(2_000, 'elected (value)')).toBe('V2');
      expect(await client.leader('shared2')).toMatchObject({ key, value: 'V2' });
      expect(await observer.line(5_000, '-l: new leader key')).toBe(key);
      expect(await observer.line(2_000, '-l: new leader value')).toBe('V2');
    } finally {
      await Promise.all([stop(waiter.child), stop(observer.child)]);
    }
  });
});
