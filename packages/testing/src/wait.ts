import { EtcdHarnessError } from './errors.js';

/** Resolves after `ms`, or rejects with `signal.reason` as soon as the signal aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Settles like `promise`, but rejects with ETCD_TIMEOUT after `timeoutMs` (and with
 * `signal.reason` on abort) so no caller waits forever on an engine or a child process.
 * The underlying work is not cancelled; callers clean up after a rejection.
 */
export function withDeadline<T>(
  promise: Promise<T>,
  timeoutMs: number,
  what: string,
  signal?: AbortSignal,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      done();
      reject(new EtcdHarnessError('ETCD_TIMEOUT', `${what} did not finish within ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = () => {
      done();
      reject(signal?.reason as Error);
    };
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        done();
        resolve(value);
      },
      (error: unknown) => {
        done();
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/**
 * Like `Promise.all`, but waits for every promise to settle before rejecting with the first
 * failure, so nothing is still running when the caller cleans up after it.
 */
export async function allSettledOrThrow<T>(promises: Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}
