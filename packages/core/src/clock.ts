import { MAX_TIMER_MS } from './options.js';

/**
 * Time as the SDK sees it. Deadlines are measured on a monotonic clock, never on the wall clock,
 * which can jump (NTP, VM migration). Every timer in core goes through one, so the timing rules
 * can be unit tested with a fake.
 */
export interface Clock {
  /** Milliseconds on a monotonic clock with an arbitrary origin. */
  now(): number;
  setTimeout(callback: () => void, delayMs: number): unknown;
  clearTimeout(handle: unknown): void;
  /**
   * Keeps the process alive until the returned function is called. SDK timers never do (so a
   * closed client lets the process exit), but a live session, an observer or a running `lead()`
   * is work the process is waiting on, also while etcd is unreachable and no socket is open.
   */
  hold(): () => void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (callback, delayMs) => {
    const handle = setTimeout(callback, Math.max(0, delayMs));
    // A pending SDK timer must never keep a process alive on its own.
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  hold: () => {
    const handle = setInterval(() => {}, MAX_TIMER_MS);
    return () => clearInterval(handle);
  },
};

/** Calls `fn` once `clock.now() >= at`, however far away `at` is. Returns a canceller. */
export function callAt(clock: Clock, at: number, fn: () => void): () => void {
  let handle: unknown;
  let cancelled = false;
  const arm = () => {
    const delay = at - clock.now();
    if (delay <= 0) return fn();
    // setTimeout fires at once for delays above 2^31-1 ms; re-arm in steps instead.
    handle = clock.setTimeout(() => !cancelled && arm(), Math.min(delay, MAX_TIMER_MS));
  };
  arm();
  return () => {
    cancelled = true;
    clock.clearTimeout(handle);
  };
}

/** Resolves after `ms`; rejects with `signal.reason` as soon as the signal aborts. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  let cancel = () => {};
  const slept = new Promise<void>((resolve) => (cancel = callAt(clock, clock.now() + ms, resolve)));
  return signal ? raceSignal(slept, signal).finally(cancel) : slept;
}

/**
 * Waits for `promise` or the signal, whichever comes first; on abort rejects with
 * `signal.reason`. The listener is removed either way, so long waits do not leak.
 */
export function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise
      .finally(() => signal.removeEventListener('abort', onAbort))
      .then(resolve, reject as (err: unknown) => void);
  });
}

/** A signal that aborts with `reason()` after `ms` on `clock`, and a disposer for its timer. */
export function timeoutSignal(
  clock: Clock,
  ms: number,
  reason: () => Error,
): { signal: AbortSignal } & Disposable {
  const controller = new AbortController();
  const cancel = callAt(clock, clock.now() + ms, () => controller.abort(reason()));
  return { signal: controller.signal, [Symbol.dispose]: cancel };
}

/** One signal that aborts when any of `signals` does (undefined entries are skipped). */
export function anySignal(...signals: (AbortSignal | undefined)[]): AbortSignal {
  return AbortSignal.any(signals.filter((s): s is AbortSignal => s !== undefined));
}
