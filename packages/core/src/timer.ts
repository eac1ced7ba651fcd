import type { Clock } from './clock.js';

// setTimeout fires at once for delays above 2^31-1 ms (~24.8 days); long TTLs exceed that.
const MAX_DELAY_MS = 2 ** 31 - 1;

/** Calls `fn` once `clock.now() >= at`, however far away `at` is. Returns a canceller. */
export function callAt(clock: Clock, at: number, fn: () => void): () => void {
  let handle: unknown;
  const arm = () => {
    const delay = at - clock.now();
    if (delay <= 0) return fn();
    handle = clock.setTimeout(arm, Math.min(delay, MAX_DELAY_MS));
  };
  arm();
  return () => clock.clearTimeout(handle);
}
