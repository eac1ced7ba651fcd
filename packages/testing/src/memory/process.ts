/**
 * One client's process as the in-memory etcd sees it: its clock, and a pause. A paused process
 * runs nothing — its timers and the answers and events sent to it wait, in order — while etcd's
 * own time goes on (leases expire); resuming runs what waited, late, as after SIGSTOP/SIGCONT.
 */
import type { MemoryClock } from './clock.js';

/** The clock interface of `@leasehold/core` (its `Clock`), for one process. */
export interface ProcessClock {
  now(): number;
  setTimeout(callback: () => void, delayMs: number): unknown;
  clearTimeout(handle: unknown): void;
  hold(): () => void;
}

export class MemoryProcess {
  #paused = false;
  #waiting: (() => void)[] = [];
  readonly clock: ProcessClock;

  constructor(readonly time: MemoryClock) {
    this.clock = {
      now: () => time.now(),
      setTimeout: (callback, delayMs) =>
        time.schedule(time.now() + Math.max(0, delayMs), () => this.run(callback)),
      clearTimeout: (handle) => time.cancel(handle),
      // Nothing here keeps Node alive: the test's own promises do.
      hold: () => () => {},
    };
  }

  get paused(): boolean {
    return this.#paused;
  }

  /** Runs `fn` in this process: now, or on resume if it is paused. */
  run(fn: () => void): void {
    if (this.#paused) this.#waiting.push(fn);
    else fn();
  }

  pause(): void {
    this.#paused = true;
  }

  /** Runs what waited, in the order it arrived (what it starts runs after). */
  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const fn of waiting) fn();
  }
}
