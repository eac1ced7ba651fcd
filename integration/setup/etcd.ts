import { randomBytes } from 'node:crypto';
import { Etcd3, type IOptions } from 'etcd3';
import { inject } from 'vitest';

/** Client URLs of the run's shared etcd (started once by global-etcd.ts). */
export function sharedEndpoints(): string[] {
  return inject('etcdEndpoints');
}

/** A key prefix no other test uses, e.g. `/t/mutex-1a2b3c4d/`. */
export function uniquePrefix(label: string): string {
  const safe = label.replace(/[^a-zA-Z0-9_-]+/g, '-');
  return `/t/${safe}-${randomBytes(4).toString('hex')}/`;
}

export interface WaitForOptions {
  /** Default 10 000 ms. */
  timeoutMs?: number;
  /** Default 50 ms. */
  intervalMs?: number;
  /** What is being waited for, for the error message. */
  what?: string;
}

/**
 * Polls `predicate` until it returns a truthy value (which is returned) and throws a descriptive
 * error at the deadline, including the predicate's last error. Tests wait for events with this
 * instead of sleeping for a guessed time.
 */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  options: WaitForOptions = {},
): Promise<NonNullable<T>> {
  const { timeoutMs = 10_000, intervalMs = 50, what = 'condition' } = options;
  const deadline = performance.now() + timeoutMs;
  let attempts = 0;
  let lastError: unknown;
  for (;;) {
    attempts++;
    try {
      // A predicate may be a pending event (a promise): it must not outlive the deadline.
      const value = await beforeDeadline(predicate, deadline);
      if (value) return value;
      lastError = undefined;
    } catch (error) {
      lastError = error;
    }
    if (performance.now() >= deadline) {
      const last =
        lastError === undefined
          ? 'it kept returning a falsy value'
          : `last error: ${describeError(lastError)}`;
      throw new Error(
        `waitFor: ${what} not met within ${timeoutMs} ms (${attempts} attempts; ${last})`,
        {
          cause: lastError,
        },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

async function beforeDeadline<T>(
  predicate: () => T | Promise<T>,
  deadline: number,
): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), Math.max(0, deadline - performance.now()));
  });
  try {
    return await Promise.race([Promise.resolve().then(predicate), expired]);
  } finally {
    clearTimeout(timer);
  }
}

function describeError(error: unknown): string {
  if (error instanceof Error) return error.message;
  try {
    return JSON.stringify(error);
  } catch {
    return 'unprintable error';
  }
}

type Policy = NonNullable<NonNullable<IOptions['faultHandling']>['global']>;

/**
 * etcd3's defaults hide faults from tests: a per-host circuit breaker keeps a client down ~5 s
 * after a reset, and a global retry re-sends calls. This pass-through policy makes every
 * failure visible at once and lets the client reconnect on the next call.
 */
const passThrough = {
  execute: async <R>(fn: (context: { signal: AbortSignal }) => R | Promise<R>) =>
    fn({ signal: new AbortController().signal }),
} as unknown as Policy;

/** An etcd3 client without retries or circuit breakers; close it in the test. */
export function etcdClient(endpoints: string[] | string): Etcd3 {
  return new Etcd3({
    hosts: endpoints,
    faultHandling: { host: () => passThrough, global: passThrough },
  });
}

/** A call deadline `ms` from now, for etcd3's `.options({ deadline })`. */
export function deadlineIn(ms: number): { deadline: Date } {
  return { deadline: new Date(Date.now() + ms) };
}

/**
 * Listens for a client's background clean-up failures (expected in tests that cut the network).
 * Tolerates a client without the event so a test can also be run against an older build.
 */
export function onCleanup(client: object, listener: (error: Error) => void): void {
  (client as { onCleanupError?: (fn: (error: Error) => void) => unknown }).onCleanupError?.(
    listener,
  );
}
