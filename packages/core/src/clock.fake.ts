/**
 * Test doubles for timing maths: a clock that moves only when told to, and helpers to settle and
 * inspect promises. The fake etcd they drive is in etcd.fake.ts; real etcd behaviour is tested in
 * integration/.
 */
import type { Clock } from './clock.js';

export interface FakeClock extends Clock {
  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void;
  /** Moves time forward without firing anything: an event loop that was stalled. */
  stall(ms: number): void;
  readonly pending: number;
  /** Holds on the process not yet released (see `Clock.hold`). */
  holds: number;
}

export function fakeClock(start = 1_000): FakeClock {
  let now = start;
  let next = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  const fireDue = (until: number) => {
    for (;;) {
      const due = [...timers.entries()]
        .filter(([, t]) => t.at <= until)
        .sort((a, b) => a[1].at - b[1].at || a[0] - b[0])[0];
      if (!due) return;
      timers.delete(due[0]);
      now = Math.max(now, due[1].at);
      due[1].fn();
    }
  };
  const clock: FakeClock = {
    now: () => now,
    setTimeout: (fn, delayMs) => {
      timers.set(++next, { at: now + Math.max(0, delayMs), fn });
      return next;
    },
    clearTimeout: (handle) => void timers.delete(handle as number),
    hold: () => {
      clock.holds++;
      let held = true;
      return () => {
        if (held) clock.holds--;
        held = false;
      };
    },
    holds: 0,
    advance(ms) {
      const target = now + ms;
      fireDue(target);
      now = target;
    },
    stall(ms) {
      now += ms;
    },
    get pending() {
      return timers.size;
    },
  };
  return clock;
}

/** A promise the test settles. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** How a promise has settled so far (check after `flush()`). */
export function track<T>(promise: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  promise.then(
    (value) => Object.assign(state, { settled: true, value }),
    (error: unknown) => Object.assign(state, { settled: true, error }),
  );
  return state;
}

/** Lets pending promise callbacks run. */
export const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
