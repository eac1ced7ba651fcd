import { describe, expect, it } from 'vitest';
import type { Clock } from './clock.js';
import { LeaseDeadline } from './deadline.js';
import { callAt } from './timer.js';

/** A clock that only moves when told to; timers fire as it passes them. */
function fakeClock(): Clock & { advance(ms: number): void } {
  let now = 1_000;
  const timers = new Map<number, { at: number; fn: () => void }>();
  let next = 0;
  return {
    now: () => now,
    setTimeout: (fn, delayMs) => {
      timers.set(++next, { at: now + delayMs, fn });
      return next;
    },
    clearTimeout: (handle) => void timers.delete(handle as number),
    advance(ms) {
      const target = now + ms;
      for (;;) {
        const due = [...timers.entries()]
          .filter(([, t]) => t.at <= target)
          .sort((a, b) => a[1].at - b[1].at)[0];
        if (!due) break;
        timers.delete(due[0]);
        now = due[1].at;
        due[1].fn();
      }
      now = target;
    },
  };
}

describe('LeaseDeadline', () => {
  it('counts from the send time of the keepalive, not from when its answer arrived', () => {
    const clock = fakeClock();
    const deadline = new LeaseDeadline(clock, 0, clock.now(), 10);
    const sentAt = clock.now();
    clock.advance(3_000); // the answer took 3 s to arrive
    deadline.answered(sentAt, 10);
    expect(deadline.expiresAt).toBe(sentAt + 10_000);
    expect(deadline.remainingMs()).toBe(7_000);
  });

  it('subtracts the safety margin', () => {
    const clock = fakeClock();
    const deadline = new LeaseDeadline(clock, 500, clock.now(), 2);
    expect(deadline.remainingMs()).toBe(1_500);
    clock.advance(1_500);
    expect(deadline.passed()).toBe(true);
  });

  it('never moves backwards when answers arrive out of order', () => {
    const clock = fakeClock();
    const deadline = new LeaseDeadline(clock, 0, clock.now(), 5);
    const early = clock.now();
    clock.advance(1_000);
    deadline.answered(clock.now(), 5);
    const later = deadline.expiresAt;
    deadline.answered(early, 5);
    expect(deadline.expiresAt).toBe(later);
  });

  it('uses the TTL etcd granted on each answer', () => {
    const clock = fakeClock();
    const deadline = new LeaseDeadline(clock, 0, clock.now(), 2);
    deadline.answered(clock.now(), 30);
    expect(deadline.remainingMs()).toBe(30_000);
  });
});

describe('callAt', () => {
  it('fires once the clock reaches the time, and not before', () => {
    const clock = fakeClock();
    let fired = 0;
    callAt(clock, clock.now() + 100, () => fired++);
    clock.advance(99);
    expect(fired).toBe(0);
    clock.advance(1);
    expect(fired).toBe(1);
  });

  it('handles delays beyond setTimeout’s 2^31-1 ms limit by re-arming', () => {
    const clock = fakeClock();
    let fired = 0;
    const at = clock.now() + 9_000_000_000 * 1000;
    callAt(clock, at, () => fired++);
    clock.advance(2 ** 31);
    expect(fired).toBe(0);
    clock.advance(at - clock.now());
    expect(fired).toBe(1);
  });

  it('can be cancelled', () => {
    const clock = fakeClock();
    let fired = 0;
    const cancel = callAt(clock, clock.now() + 10, () => fired++);
    cancel();
    clock.advance(20);
    expect(fired).toBe(0);
  });
});
