import { describe, expect, it, vi } from 'vitest';
import { fakeClock, flush } from './clock.fake.js';
import { fakeEtcd } from './etcd.fake.js';
import { isLeaseLostError, type LeaseLostError } from './errors.js';
import type { Leasehold } from './client.js';
import { grantLease } from './internal.js';
import { answerTimeoutMs, Session } from './session.js';

async function started(ttlSeconds = 10, safetyMarginMs = 0) {
  const clock = fakeClock();
  const fake = fakeEtcd();
  const reports: Error[] = [];
  const session = await Session.create(fake.etcd, clock, (e) => reports.push(e), {
    ttlSeconds,
    safetyMarginMs,
  });
  await flush(); // the keepalive stream opens and the first keepalive goes out
  return { clock, session, reports, ...fake, stream: fake.streams[0]! };
}

const reasonOf = (session: Session) => (session.signal.reason as LeaseLostError).reason;

describe('Session deadline', () => {
  it('counts from the send time of the answered keepalive, not from when its answer arrived', async () => {
    const { clock, session, stream } = await started(10);
    const sentAt = clock.now();
    clock.advance(3_000); // the answer took 3 s
    stream.answer(10);
    expect(session.timeLeftMs()).toBe(sentAt + 10_000 - clock.now());
  });

  it('never moves the deadline backwards when an older keepalive is answered late', async () => {
    const { clock, session, stream } = await started(10);
    clock.advance(3_334); // a second keepalive goes out on the TTL/3 tick
    stream.answer(10); // answers the first (older) send
    const after = session.timeLeftMs();
    stream.answer(1); // a smaller TTL for the newer send must not shorten it
    expect(session.timeLeftMs()).toBe(after);
  });

  it('keeps remainingMs(), the deprecated name of timeLeftMs(), equal to it before and after the loss', async () => {
    const { clock, session } = await started(2, 0);
    clock.advance(500);
    expect(session.remainingMs()).toBe(session.timeLeftMs());
    expect(session.timeLeftMs()).toBe(1_500);
    clock.stall(4_000);
    expect(session.remainingMs()).toBe(0);
    expect(session.timeLeftMs()).toBe(0);
  });

  it('keeps remainingMs() equal to timeLeftMs() once closed: both 0', async () => {
    const { session } = await started(10);
    expect(session.remainingMs()).toBeGreaterThan(0);
    const closing = session.close();
    expect(session.timeLeftMs()).toBe(0);
    expect(session.remainingMs()).toBe(0);
    await closing;
  });

  it('is lost with reason deadline when its timer fires', async () => {
    const { clock, session } = await started(2, 100);
    const lost = vi.fn();
    session.onLost(lost);
    clock.advance(1_899);
    expect(session.isLost).toBe(false);
    clock.advance(1);
    expect(lost).toHaveBeenCalledOnce();
    expect(reasonOf(session)).toBe('deadline');
  });

  it('after a stall past the deadline, the first read sees the loss before any timer runs', async () => {
    const { clock, session } = await started(2, 0);
    clock.stall(4_000); // no timer fired: the event loop was blocked
    expect(session.timeLeftMs()).toBe(0);
    expect(session.isLost).toBe(true);
    expect(() => session.throwIfLost()).toThrow(/local deadline/);
    expect(reasonOf(session)).toBe('deadline');
  });

  it('a keepalive answered after the deadline passed does not revive the session', async () => {
    const { clock, session, stream } = await started(2, 0);
    clock.stall(2_500);
    stream.answer(2); // the answer was waiting in the socket during the stall
    expect(session.isLost).toBe(true);
  });
});

describe('Session keepalive', () => {
  it('sends a keepalive every TTL/3', async () => {
    const { clock, stream, streams } = await started(9);
    expect(stream.written).toHaveLength(1);
    stream.answer(9);
    clock.advance(3_000);
    stream.answer(9);
    clock.advance(3_000);
    expect(stream.written).toHaveLength(3);
    expect(streams).toHaveLength(1);
  });

  it('replaces a stream whose keepalive goes unanswered (a frozen member)', async () => {
    const { clock, streams, stream, stuck } = await started(10);
    clock.advance(answerTimeoutMs(10));
    expect(stream.cancelled).toBe(true);
    expect(stuck).toEqual([stream]); // its member rests before the new stream is opened
    await flush();
    expect(streams).toHaveLength(2);
    expect(streams[1]!.written).toHaveLength(1);
  });

  it('believes "lease gone" only after three answers on fresh streams', async () => {
    const { clock, session, streams } = await started(10);
    for (let i = 0; i < 2; i++) {
      streams.at(-1)!.answer(0);
      expect(session.isLost).toBe(false);
      clock.advance(1_000);
      await flush();
    }
    streams.at(-1)!.answer(-1);
    expect(reasonOf(session)).toBe('gone');
  });
});

describe('Session close and revoke', () => {
  it('close revokes the lease, aborts the signal once, and is not reported as a loss', async () => {
    const { session, revokes } = await started();
    const lost = vi.fn();
    session.onLost(lost);
    await Promise.all([session.close(), session.close()]);
    expect(revokes).toEqual(['255']);
    expect(session.signal.reason).toMatchObject({ name: 'SessionClosedError' });
    expect(lost).not.toHaveBeenCalled();
  });

  it('after losing touch, keeps revoking while etcd is down, and stops once etcd says the lease is gone', async () => {
    const { clock, session, revokes, state, reports } = await started(2, 0);
    state.revokeFailures = 1_000;
    clock.advance(2_000); // deadline: lost, revoke starts
    expect(isLeaseLostError(session.signal.reason)).toBe(true);
    for (let i = 0; i < 30; i++) {
      clock.advance(1_000);
      await flush();
    }
    expect(revokes.length).toBeGreaterThan(20); // still trying: no answer from etcd yet
    expect(reports).toHaveLength(1); // reported once, not per attempt
    state.revokeFailures = 0;
    state.leaseGone = true;
    clock.advance(1_000);
    await flush();
    const count = revokes.length;
    clock.advance(10_000);
    await flush();
    expect(revokes.length).toBe(count);
  });

  it('gives up revoking two TTLs after etcd answers again, and reports it', async () => {
    const { clock, revokes, state, reports } = await started(2, 0);
    state.revokeFailures = 1_000;
    clock.advance(2_000);
    await flush();
    state.answers++; // etcd answers other calls again, but this revoke keeps failing
    for (let i = 0; i < 10; i++) {
      clock.advance(1_000);
      await flush();
    }
    const count = revokes.length;
    clock.advance(5_000);
    await flush();
    expect(revokes.length).toBe(count);
    expect(reports.length).toBe(2); // the first failure, then giving up
  });
});

describe('Session grant', () => {
  it('asks etcd for its lease once: a grant retried after a lost answer would leave a second lease', async () => {
    const { retried } = await started();
    expect(retried.filter((c) => c.what === 'lease grant')).toEqual([
      { what: 'lease grant', idempotent: false },
    ]);
  });

  it('grants the internal, unkept leases of sibling packages with retries: one nobody holds expires', async () => {
    const fake = fakeEtcd();
    const lease = await grantLease({ etcd: fake.etcd } as unknown as Leasehold, 'retention', 5);
    expect(lease.ttlSeconds).toBeGreaterThan(0);
    expect(fake.retried).toEqual([{ what: 'retention', idempotent: true }]);
  });
});

describe('Session resumed by lease id', () => {
  async function resumed(leaseGone = false) {
    const clock = fakeClock();
    const fake = fakeEtcd();
    fake.state.leaseGone = leaseGone;
    const create = Session.create(fake.etcd, clock, () => {}, { leaseId: 0x1234n });
    return { clock, create, ...fake };
  }

  it('keeps the lease id, takes the granted TTL, and starts its deadline from the time left', async () => {
    const { clock, create, calls, retried } = await resumed();
    const session = await create;
    expect(calls).toContain('lease time-to-live');
    expect(calls).not.toContain('lease grant');
    // A read: safe to retry on another member.
    expect(retried).toContainEqual({ what: 'lease time-to-live', idempotent: true });
    expect(session.leaseId).toBe(0x1234n);
    expect(session.ttlSeconds).toBe(10);
    // 3 s left, minus the default margin for a 10 s TTL (1 s).
    expect(session.timeLeftMs()).toBe(2_000);
    clock.advance(2_000);
    expect(isLeaseLostError(session.signal.reason)).toBe(true);
  });

  it('fails with LeaseLostError (gone) when the lease no longer exists, and revokes nothing', async () => {
    const { create, revokes } = await resumed(true);
    const err = await create.catch((e: unknown) => e);
    expect(isLeaseLostError(err) && err.reason).toBe('gone');
    expect(String((err as Error).message)).toMatch(/lease 1234 cannot be resumed/);
    await flush();
    expect(revokes).toEqual([]);
  });

  it('refuses ttlSeconds with leaseId, and ids outside 1..2^63-1', async () => {
    const clock = fakeClock();
    const { etcd, calls } = fakeEtcd();
    const bad: unknown[] = [
      { leaseId: 1n, ttlSeconds: 5 },
      { leaseId: 0n },
      { leaseId: -1n },
      { leaseId: 2n ** 63n },
      { leaseId: 5 },
    ];
    for (const options of bad) {
      await expect(Session.create(etcd, clock, () => {}, options as never)).rejects.toThrow(
        /^options\.(leaseId|ttlSeconds) must be/,
      );
    }
    expect(calls).toEqual([]);
  });
});

describe('Session and the process', () => {
  it('keeps the process alive while live (also with no stream open), and lets go once closed or lost', async () => {
    const { clock, session } = await started(10);
    expect(clock.holds).toBe(1);
    await session.close();
    expect(clock.holds).toBe(0);
    const lost = await started(2, 100);
    lost.clock.advance(2_000);
    expect(lost.session.isLost).toBe(true);
    expect(lost.clock.holds).toBe(0);
  });
});
