import { describe, expect, it } from 'vitest';
import { fakeElections } from './election.fake.js';
import { campaign } from './election.js';
import {
  isInsufficientLeaseTimeError,
  isInvalidArgumentError,
  isLeadershipLostError,
  isLeadershipResignedError,
  isLeaseLostError,
  type InsufficientLeaseTimeError,
} from './errors.js';
import { assertTimeLeft } from './time-left.js';

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

describe('assertTimeLeft', () => {
  it('returns the time left when enough is', () => {
    expect(assertTimeLeft(1_000, { leftMs: 1_500, lost: undefined, what: 'lock k' })).toBe(1_500);
    expect(assertTimeLeft(0, { leftMs: 0.5, lost: undefined, what: 'lock k' })).toBe(0.5);
  });

  it('throws InsufficientLeaseTimeError with needed and left when less is', () => {
    const err = thrown(() =>
      assertTimeLeft(2_000, { leftMs: 1_500, lost: undefined, what: 'lock k' }),
    );
    expect(isInsufficientLeaseTimeError(err)).toBe(true);
    const e = err as InsufficientLeaseTimeError;
    expect([e.code, e.name, e.neededMs, e.leftMs]).toEqual([
      'INSUFFICIENT_LEASE_TIME',
      'InsufficientLeaseTimeError',
      2_000,
      1_500,
    ]);
    expect(e.message).toBe(
      "lock k has 1500 ms left before its lease's local deadline; the work needs 2000 ms",
    );
    expect(e.cause).toBeUndefined();
  });

  it('once lost, always throws, with the loss as its cause', () => {
    const loss = new Error('its session was lost');
    const err = thrown(() => assertTimeLeft(0, { leftMs: 0, lost: loss, what: 'lock k' }));
    expect(isInsufficientLeaseTimeError(err) && [err.leftMs, err.cause]).toEqual([0, loss]);
  });

  it('rejects a bad ms with InvalidArgumentError naming it', () => {
    for (const bad of [-1, NaN, Infinity, '100', undefined, 10n]) {
      const err = thrown(() => assertTimeLeft(bad, { leftMs: 5, lost: undefined, what: 'x' }));
      expect(isInvalidArgumentError(err)).toBe(true);
      expect((err as Error).message).toMatch(
        /^assertTimeLeft\(ms\) must be a non-negative, finite number of milliseconds, got /,
      );
    }
  });
});

describe('time left on holds and sessions', () => {
  it('a leadership reports the time left on its session, and 0 with the loss as cause after a stall past the deadline', async () => {
    const { clock, maker, session } = await fakeElections();
    const leadership = await campaign(maker, 'e', 'alpha', {});
    const left = leadership.timeLeftMs();
    expect(left).toBe(session.timeLeftMs());
    expect(left).toBeGreaterThan(3_000_000);
    clock.stall(1_000);
    expect(leadership.timeLeftMs()).toBe(left - 1_000); // no keepalive answered meanwhile
    expect(leadership.assertTimeLeft(left - 1_000)).toBe(left - 1_000);
    expect(isInsufficientLeaseTimeError(thrown(() => leadership.assertTimeLeft(left)))).toBe(true);

    clock.stall(left); // past the deadline; no timer has run
    expect(leadership.timeLeftMs()).toBe(0);
    expect(session.timeLeftMs()).toBe(0);
    const err = thrown(() => leadership.assertTimeLeft(1)) as InsufficientLeaseTimeError;
    expect(isInsufficientLeaseTimeError(err)).toBe(true);
    expect(isLeadershipLostError(err.cause)).toBe(true);
    const sessionErr = thrown(() => session.assertTimeLeft(0)) as InsufficientLeaseTimeError;
    expect(isLeaseLostError(sessionErr.cause) && sessionErr.cause.reason).toBe('deadline');
  });

  it('after resign, no time is left and the cause is the resignation', async () => {
    const { maker } = await fakeElections();
    const leadership = await campaign(maker, 'e', 'alpha', {});
    await leadership.resign();
    expect(leadership.timeLeftMs()).toBe(0);
    const err = thrown(() => leadership.assertTimeLeft(0)) as InsufficientLeaseTimeError;
    expect(isLeadershipResignedError(err.cause)).toBe(true);
    expect(isInvalidArgumentError(thrown(() => leadership.assertTimeLeft(-5)))).toBe(true);
  });
});
