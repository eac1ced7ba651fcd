import { setTimeout as sleep } from 'node:timers/promises';
import {
  connect,
  isLockTakenError,
  isLockTimeoutError,
  type LeaseLostError,
} from '@leasehold/core';
import { createScheduler } from '@leasehold/cron';
import { Etcd3 } from 'etcd3';
import { afterAll, describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { inMemoryTelemetry } from '../setup/telemetry.js';

/** OpenTelemetry's SpanStatusCode. */
const SpanStatusCode = { UNSET: 0, ERROR: 2 } as const;

const endpoints = sharedEndpoints();
const admin = new Etcd3({ hosts: endpoints });
afterAll(() => admin.close());

async function keysUnder(prefix: string): Promise<number> {
  return (await admin.getAll().prefix(prefix).keys()).length;
}

describe('OpenTelemetry metrics and spans on a real etcd', () => {
  it('locks: acquisitions by outcome, a handoff with its wait, tokens, keepalives, the remaining lease, and spans with tokens', async () => {
    const otel = inMemoryTelemetry();
    const lockPrefix = uniquePrefix('otel-lock');
    const options = { endpoints, lockPrefix, telemetry: otel.telemetry };
    await using a = await connect(options);
    await using b = await connect(options);

    const started = performance.now();
    const first = await a.acquire('jobs');
    const firstTookMs = performance.now() - started; // uncontended: the wait it records is less
    const waiting = b.acquire('jobs');
    await waitFor(async () => (await keysUnder(`${lockPrefix}jobs/`)) === 2, {
      what: "the second client's key queued behind the holder",
    });
    const revision = await first.put(`${lockPrefix}data`, 'written under the lock');
    await sleep(300); // the holder works a while: the waiter's wait
    await first.release();
    const second = await waiting;

    const taken = await a.tryAcquire('jobs').catch((e: unknown) => e);
    expect(isLockTakenError(taken)).toBe(true);
    const timedOut = await a.acquire('jobs', { timeoutMs: 200 }).catch((e: unknown) => e);
    expect(isLockTimeoutError(timedOut)).toBe(true);
    await second.release();

    const acquisitions = (outcome: string) =>
      otel.count('leasehold.acquisitions', { kind: 'lock', outcome });
    expect(await acquisitions('acquired')).toBe(2);
    expect(await acquisitions('taken')).toBe(1);
    expect(await acquisitions('timeout')).toBe(1);
    expect(await otel.count('leasehold.tokens.issued', { kind: 'lock' })).toBe(2);
    expect(await otel.count('leasehold.handoffs', { kind: 'lock' })).toBe(1);
    const wait = await otel.histogram('leasehold.acquire.wait', { kind: 'lock' });
    expect(wait.count).toBe(2);
    // The handoff waited out the holder's 300 ms of work (less the moment b's join took to be seen);
    // the uncontended acquisition recorded no more than its whole call took, however slow the host.
    expect(wait.max).toBeGreaterThanOrEqual(250);
    expect(wait.min).toBeLessThanOrEqual(Math.ceil(firstTookMs));

    const metrics = await otel.collect();
    expect(metrics.get('leasehold.acquire.wait')?.descriptor.unit).toBe('ms');
    expect(metrics.get('leasehold.acquisitions')?.scope).toMatch(/^@leasehold\/core@\d+\.\d+\.\d+/);
    await waitFor(async () => (await otel.histogram('leasehold.keepalive.duration')).count > 0, {
      what: 'a keepalive round trip recorded',
    });

    const session = await a.sharedSession();
    const remaining = await otel.points('leasehold.lease.remaining', {
      lease_id: session.leaseId.toString(16),
    });
    expect(remaining).toHaveLength(1);
    expect(remaining[0]!.value).toBeGreaterThan(0);
    expect(remaining[0]!.value).toBeLessThanOrEqual(session.ttlSeconds * 1000);

    const acquired = otel.spans('leasehold.lock.acquire', { 'leasehold.outcome': 'acquired' });
    expect(acquired.map((s) => s.attributes['leasehold.token']).sort()).toEqual(
      [first.token.toString(), second.token.toString()].sort(),
    );
    for (const span of acquired) {
      expect(span.attributes).toMatchObject({ 'leasehold.kind': 'lock', 'leasehold.name': 'jobs' });
      expect(span.status.code).toBe(SpanStatusCode.UNSET);
    }
    const [tryTaken] = otel.spans('leasehold.lock.try_acquire');
    expect(tryTaken?.attributes['leasehold.outcome']).toBe('taken');
    expect(tryTaken?.status.code).toBe(SpanStatusCode.ERROR);
    expect(otel.spans('leasehold.lock.acquire', { 'leasehold.outcome': 'timeout' })).toHaveLength(
      1,
    );
    const releases = otel.spans('leasehold.lock.release');
    expect(releases.map((s) => s.attributes['leasehold.token']).sort()).toEqual(
      [first.token.toString(), second.token.toString()].sort(),
    );
    const [write] = otel.spans('leasehold.fenced_write');
    expect(write?.attributes).toMatchObject({
      'leasehold.token': first.token.toString(),
      'leasehold.key': first.key,
      'leasehold.revision': revision.toString(),
      'leasehold.ops': 1,
    });
    await otel.shutdown();
  });

  it('elections and sessions: leadership changes, campaign and resign spans, a session lost to a revoke counted by reason', async () => {
    const otel = inMemoryTelemetry();
    await using client = await connect({
      endpoints,
      electionPrefix: uniquePrefix('otel-election'),
      telemetry: otel.telemetry,
    });
    const session = await client.session({ ttlSeconds: 5 });
    const term1 = await client.campaign('e', 'one', { session });
    await term1.resign();
    const term2 = await client.campaign('e', 'two', { session });
    const lost = new Promise<LeaseLostError>((resolve) => session.onLost(resolve));
    await admin.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    await waitFor(() => lost, { timeoutMs: 5_000, what: 'the session lost after the revoke' });
    await waitFor(() => !term2.isLeader, { timeoutMs: 5_000, what: 'the term lost' });

    expect(await otel.count('leasehold.sessions.lost', { reason: 'gone' })).toBe(1);
    expect(await otel.count('leasehold.sessions.lost')).toBe(1);
    const changes = (transition: string) =>
      otel.count('leasehold.leadership.changes', { transition });
    expect(await changes('elected')).toBe(2);
    expect(await changes('resigned')).toBe(1);
    expect(await changes('lost')).toBe(1);
    expect(
      await otel.count('leasehold.acquisitions', { kind: 'election', outcome: 'acquired' }),
    ).toBe(2);
    expect(await otel.count('leasehold.tokens.issued', { kind: 'election' })).toBe(2);

    const campaigns = otel.spans('leasehold.election.campaign');
    expect(campaigns.map((s) => s.attributes['leasehold.token'])).toEqual([
      term1.token.toString(),
      term2.token.toString(),
    ]);
    expect(campaigns[0]!.attributes).toMatchObject({
      'leasehold.kind': 'election',
      'leasehold.name': 'e',
      'leasehold.lease_id': session.leaseId.toString(16),
    });
    const resigns = otel.spans('leasehold.election.resign');
    expect(resigns.map((s) => s.attributes['leasehold.token'])).toEqual([term1.token.toString()]);
    // A lost session is no longer reported by the remaining-lease gauge.
    expect(
      await otel.points('leasehold.lease.remaining', { lease_id: session.leaseId.toString(16) }),
    ).toEqual([]);
    await otel.shutdown();
  });

  it('cron: every run is counted by job and outcome', async () => {
    const otel = inMemoryTelemetry();
    await using client = await connect({ endpoints, telemetry: otel.telemetry });
    const scheduler = await createScheduler(client, { prefix: uniquePrefix('otel-cron') });
    let runs = 0;
    scheduler.schedule('tick', { everyMs: 1_000 }, () => void runs++);
    scheduler.schedule('fails', { everyMs: 1_000 }, () => {
      throw new Error('job failed');
    });
    scheduler.onError(() => {}); // the failing job's errors are expected
    await waitFor(async () => (await otel.count('leasehold.cron.runs', { job: 'fails' })) > 0, {
      what: 'a failed run counted',
    });
    await waitFor(async () => (await otel.count('leasehold.cron.runs', { job: 'tick' })) > 0, {
      what: 'a run counted',
    });
    await scheduler.stop();
    expect(await otel.count('leasehold.cron.runs', { job: 'tick', outcome: 'ok' })).toBe(runs);
    expect(
      await otel.count('leasehold.cron.runs', { job: 'fails', outcome: 'error' }),
    ).toBeGreaterThan(0);
    await otel.shutdown();
  });
});
