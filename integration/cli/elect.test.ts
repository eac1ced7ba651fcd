/**
 * `leasehold elect` with three candidates on one election, and `leasehold observe` following
 * it: one command at a time, and a new leader's command after the leader's leasehold is killed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { connect } from '@leasehold/core';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { assertNoOverlap, child, cleanUpAfter, Cli, Probe, type ChildRecord } from './harness.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

const TTL_S = 2;

describe('leasehold elect', () => {
  it('three candidates: one command at a time; when the leader is SIGKILLed another takes over within the TTL; observe sees each term', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-elect'));
    const connection = ['--endpoints', endpoints.join(','), '--election-prefix', prefix];
    await using probe = await Probe.start();
    const observer = new Cli(['observe', 'scheduler', '--json', ...connection]);
    await waitFor(() => observer.stdout.includes('\n'), { what: 'observe printed the state' });

    const names = ['a', 'b', 'c'];
    const clis = new Map(
      names.map((name) => [
        name,
        new Cli(
          [
            'elect',
            'scheduler',
            '--value',
            `host-${name}`,
            '--ttl',
            String(TTL_S),
            ...connection,
            '--',
            ...child(),
          ],
          probe.env(name),
        ),
      ]),
    );
    await waitFor(async () => (await admin.getAll().prefix(prefix).keys()).length === 3, {
      what: 'three candidates',
    });
    const alive = () => probe.children.filter((c) => c.closedAt === undefined);
    const leaderChild = () =>
      waitFor(() => (alive().length === 1 ? alive()[0] : undefined), {
        what: 'one command running',
      });

    const terms: ChildRecord[] = [];
    for (let round = 0; round < 2; round++) {
      const leader = await leaderChild();
      terms.push(leader);
      expect(alive()).toHaveLength(1);
      const killedAt = clis.get(leader.name)!.signal('SIGKILL');
      // The keeper stops the orphaned command; the next candidate is elected once the
      // killed leader's lease expires on the server.
      await leader.closed();
      const next = await waitFor(() => alive()[0], { what: 'the next command', timeoutMs: 15_000 });
      expect(next.start.at - killedAt).toBeLessThanOrEqual(TTL_S * 1_000 + 1_000);
    }
    const last = await leaderChild();
    terms.push(last);
    // The last one steps down on SIGTERM: forwarded, the command exits, leasehold resigns.
    clis.get(last.name)!.signal('SIGTERM');
    expect((await clis.get(last.name)!.exit()).code).toBe(143);
    await last.closed();

    const ordered = assertNoOverlap(probe.children);
    expect(ordered.map((c) => c.name)).toEqual(terms.map((t) => t.name));
    const tokens = ordered.map((c) => c.token);
    expect(tokens[0]! < tokens[1]! && tokens[1]! < tokens[2]!).toBe(true);
    expect(ordered.every((c) => c.start.key!.startsWith(`${prefix}scheduler/`))).toBe(true);
    await waitFor(async () => (await admin.getAll().prefix(prefix).keys()).length === 0, {
      what: 'every candidacy gone',
    });

    // observe saw every term, in order, with its value and token, and "no leader" at the end.
    await waitFor(() => observer.stdout.trimEnd().endsWith('"leader":null}'), {
      what: 'observe saw no leader',
    });
    observer.signal('SIGINT');
    expect((await observer.exit()).code).toBe(130);
    const states = observer.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { leader: { value: string; token: string } | null });
    const leaders = states.flatMap((s) => (s.leader ? [s.leader] : []));
    expect(leaders.map((l) => [l.value, BigInt(l.token)])).toEqual(
      ordered.map((c) => [`host-${c.name}`, c.token]),
    );
    expect(states[0]!.leader).toBeNull();
    expect(states.at(-1)!.leader).toBeNull();
  });

  it('observe prints plain lines; elect --wait-timeout exits 81 without running the command', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-elect-timeout'));
    const connection = ['--endpoints', endpoints.join(','), '--election-prefix', prefix];
    await using probe = await Probe.start();
    await using client = await connect({ endpoints, electionPrefix: prefix });
    const leadership = await client.campaign('e', 'sdk leader');
    const observer = new Cli(['observe', 'e', ...connection]);
    await waitFor(() => observer.stdout.includes('\n'), { what: 'observe printed the state' });
    expect(observer.stdout).toMatch(
      new RegExp(
        `^\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z  revision \\d+  "sdk leader" leads \\(token ${leadership.token}, lease [0-9a-f]+\\)\\n$`,
      ),
    );
    const late = new Cli(
      ['elect', 'e', '--wait-timeout', '500', ...connection, '--', ...child()],
      probe.env('never'),
    );
    const exit = await late.exit();
    expect(exit.code).toBe(81);
    expect(late.stderr).toBe(
      'leasehold: election "e" was not won within 500 ms (--wait-timeout)\n',
    );
    expect(probe.children).toHaveLength(0);
    await leadership.resign();
    await waitFor(() => observer.stdout.includes('no leader'), { what: 'observe saw no leader' });
    observer.signal('SIGTERM');
    expect((await observer.exit()).code).toBe(143);
  });
});
