/**
 * The command is stopped within TTL + grace of the moment the lock stops being trustworthy:
 * its lease revoked by someone else, leasehold cut off from etcd, or leasehold frozen. In the
 * last case leasehold cannot act at all; its keeper process stops the command at the deadline.
 */
import { connect } from '@leasehold/core';
import { TcpFaultProxy } from '@leasehold/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { child, cleanUpAfter, Cli, now, Probe, type ChildRecord } from './harness.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

const TTL_S = 3;
const GRACE_MS = 1_000;
const BOUND_MS = TTL_S * 1_000 + GRACE_MS;

const run = (
  prefix: string,
  via: string,
  env: Record<string, string>,
  extra: string[] = [],
  options: { detached?: boolean } = {},
) =>
  new Cli(
    [
      'run',
      '--endpoints',
      via,
      '--lock-prefix',
      prefix,
      '--lock',
      'job',
      '--ttl',
      String(TTL_S),
      '--grace',
      String(GRACE_MS),
      ...extra,
      '--',
      ...child(),
    ],
    env,
    options,
  );

describe('a lost lock stops the command within TTL + grace', () => {
  it('the lease is revoked by another client: SIGTERM, SIGKILL after the grace (the command ignores SIGTERM), exit 82', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-loss-revoke'));
    await using probe = await Probe.start();
    const cli = run(prefix, endpoints.join(','), probe.env('c', { DIE_ON: '' }));
    const c = await probe.started('c');
    const revokedAt = now();
    await admin.leaseClient.leaseRevoke({ ID: BigInt(`0x${c.start.leaseId}`).toString() });
    const endedAt = await c.closed();
    expect(endedAt - revokedAt).toBeLessThanOrEqual(BOUND_MS);
    const term = c.events.find((e) => e.signal === 'SIGTERM');
    expect(term, 'SIGTERM came first').toBeDefined();
    // It ignored SIGTERM, so it lived until SIGKILL, a grace period after a SIGTERM that came no
    // sooner than the revoke (both instants read by this process, not by the loaded child).
    expect(endedAt - revokedAt).toBeGreaterThanOrEqual(GRACE_MS);
    const exit = await cli.exit();
    expect(exit.code).toBe(82);
    expect(cli.stderr).toMatch(
      /^leasehold: lock "job" \(token \d+\) lost: its key was deleted by someone else; stopping the command \(SIGTERM, then SIGKILL after 1s\)\n$/,
    );
  });

  it('leasehold is cut off from etcd (fault proxy stalls): the command is stopped, exit 82, and the next holder gets a higher token', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-loss-partition'));
    await using probe = await Probe.start();
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    const cli = run(prefix, proxy.url, probe.env('c'), ['--call-timeout', '1000']);
    const c = await probe.started('c');
    const cutAt = now();
    proxy.setMode('stall');
    const endedAt = await c.closed();
    expect(endedAt - cutAt).toBeLessThanOrEqual(BOUND_MS);
    expect(c.signals()).toEqual(['SIGTERM']);
    const exit = await cli.exit();
    expect(exit.code).toBe(82);
    expect(cli.stderr).toMatch(/^leasehold: lock "job" \(token \d+\) lost: its session was lost/);
    // The lease expires on the server; the next holder's token is higher.
    await using other = await connect({ endpoints, lockPrefix: prefix });
    const next = await other.acquire('job', { timeoutMs: 15_000 });
    expect(next.token).toBeGreaterThan(c.token);
    await next.release();
  });

  it('leasehold is frozen (SIGSTOP) past its TTL: the keeper stops the command before the next holder gets the lock', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-loss-sigstop'));
    await using probe = await Probe.start();
    const cli = run(prefix, endpoints.join(','), probe.env('c'));
    const c = await probe.started('c');
    await using other = await connect({ endpoints, lockPrefix: prefix });
    const stoppedAt = cli.signal('SIGSTOP');
    const acquiring = other.acquire('job', { timeoutMs: 20_000 }).then((lock) => ({
      lock,
      at: now(),
    }));
    const endedAt = await c.closed();
    expect(endedAt - stoppedAt).toBeLessThanOrEqual(BOUND_MS);
    expect(cli.alive).toBe(true); // still frozen: the keeper did it
    expect(c.signals()).toEqual(['SIGTERM']);
    const next = await acquiring;
    expect(next.lock.token).toBeGreaterThan(c.token);
    // The command had ended before anyone else could hold the lock.
    expect(c.endAt!).toBeLessThanOrEqual(next.at);
    cli.signal('SIGCONT');
    const exit = await cli.exit();
    expect(exit.code).toBe(82);
    expect(cli.stderr).toMatch(/^leasehold: lock "job" \(token \d+\) lost: /);
    await next.lock.release();
  });

  it('leasehold is killed (SIGKILL): the keeper stops the command at once', async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-loss-sigkill'));
    await using probe = await Probe.start();
    const cli = run(prefix, endpoints.join(','), probe.env('c'));
    const c = await probe.started('c');
    const killedAt = cli.signal('SIGKILL');
    const endedAt = await c.closed();
    expect(endedAt - killedAt).toBeLessThanOrEqual(GRACE_MS);
    expect(c.signals()).toEqual(['SIGTERM']);
    await waitFor(() => !cli.alive, { what: 'leasehold gone' });
  });
});

/**
 * A signal to leasehold's whole process group, as bash's `kill -STOP %1`, a supervisor's
 * `kill -STOP -PGID` or a CI runner pausing a job sends it. The keeper must not be in that group:
 * it exists to act when leasehold cannot.
 */
describe("a signal to leasehold's whole process group", () => {
  /**
   * `a`, leading a process group of its own (a shell job), holding the lock with its command
   * running, and `b`, a second `leasehold run` queued behind it, whose command exits soon.
   */
  const holderAndNext = async (prefix: string, probe: Probe, env: Record<string, string> = {}) => {
    const a = run(prefix, endpoints.join(','), probe.env('a', env), [], { detached: true });
    const childA = await probe.started('a');
    const b = run(prefix, endpoints.join(','), probe.env('b', { EXIT_AFTER_MS: '200' }), [
      '--wait-timeout',
      '30000',
    ]);
    await waitFor(async () => (await admin.getAll().prefix(`${prefix}job/`).keys()).length === 2, {
      what: 'b queued behind a',
    });
    return { a, childA, b };
  };
  /**
   * How long `a`'s command ran after `b`'s started: 0 if it had ended before. If it had not, it is
   * given a grace period more to end, so that a failure says by how much it overlapped.
   */
  const ranOnAfter = async (a: ChildRecord, b: ChildRecord) => {
    const end = a.endAt ?? (await a.closed(GRACE_MS + 2_000).catch(() => now()));
    return Math.max(0, end - b.start.at);
  };
  /** Kills what is left of a command that outlived the test (its own process group). */
  const killGroupOf = (c: ChildRecord) => {
    try {
      process.kill(-c.start.pid, 'SIGKILL');
    } catch {
      // Gone.
    }
  };

  it("SIGSTOP of the group past the TTL: the keeper still stops the command before the next holder's command starts", async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-loss-group-stop'));
    await using probe = await Probe.start();
    const { a, childA, b } = await holderAndNext(prefix, probe);
    const stoppedAt = a.signalGroup('SIGSTOP');
    try {
      // The lease can expire TTL after its last renewal, which came before the stop: the next
      // holder's command starts after that, and a's command must be gone by then.
      const childB = await probe.started('b', BOUND_MS + 20_000);
      expect(await ranOnAfter(childA, childB), "a's command ran on after b's started (ms)").toBe(0);
      expect(childA.endAt! - stoppedAt).toBeLessThanOrEqual(BOUND_MS);
      expect(childA.signals()).toEqual(['SIGTERM']);
      expect(childB.token).toBeGreaterThan(childA.token);
    } finally {
      a.signalGroup('SIGCONT');
      killGroupOf(childA);
    }
    expect((await a.exit()).code).toBe(82);
    expect(a.stderr).toMatch(/^leasehold: lock "job" \(token \d+\) lost: /);
    expect((await b.exit()).code).toBe(0);
  });

  it("SIGKILL of the group: the command is stopped at once, SIGKILL after the grace, before the next holder's command starts", async () => {
    const prefix = cleanUpAfter(uniquePrefix('cli-loss-group-kill'));
    await using probe = await Probe.start();
    // It ignores SIGTERM: only the keeper's SIGKILL, a grace period later, ends it.
    const { a, childA, b } = await holderAndNext(prefix, probe, { DIE_ON: '' });
    const killedAt = a.signalGroup('SIGKILL');
    try {
      const childB = await probe.started('b', BOUND_MS + 20_000);
      expect(await ranOnAfter(childA, childB), "a's command ran on after b's started (ms)").toBe(0);
      // SIGTERM at once, SIGKILL a grace later (sooner than the lease's deadline here).
      expect(childA.endAt! - killedAt).toBeLessThanOrEqual(BOUND_MS);
      expect(childA.endAt! - killedAt).toBeGreaterThanOrEqual(GRACE_MS - 50);
      expect(childA.signals()).toEqual(['SIGTERM']);
    } finally {
      killGroupOf(childA);
    }
    expect((await b.exit()).code).toBe(0);
  });
});
