/**
 * Time as the SDK sees it. Deadlines are measured on a monotonic clock, never on the wall clock,
 * which can jump (NTP, VM migration). Injected so the timing rules can be unit tested.
 */
export interface Clock {
  /** Milliseconds on a monotonic clock with an arbitrary origin. */
  now(): number;
  setTimeout(callback: () => void, delayMs: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (callback, delayMs) => {
    const handle = setTimeout(callback, Math.max(0, delayMs));
    // A pending lease timer must not keep a process alive on its own.
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};
