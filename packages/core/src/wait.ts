/**
 * Waits for `promise` or the signal, whichever comes first; on abort rejects with
 * `signal.reason`. The listener is removed either way, so long waits do not leak.
 */
export function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        // Passes through exactly what the awaited promise rejected with.
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        reject(err);
      },
    );
  });
}

/** A signal that aborts with `reason()` after `ms`, and a disposer for the timer. */
export function timeoutSignal(
  ms: number,
  reason: () => Error,
): { signal: AbortSignal } & Disposable {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(reason()), ms);
  return { signal: controller.signal, [Symbol.dispose]: () => clearTimeout(timer) };
}
