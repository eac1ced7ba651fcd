import type { EtcdCluster, EtcdMember, EtcdProviderName } from './types.js';

/** Wraps provider-specific cleanup into an idempotent `close` that `await using` can call. */
export function makeCluster(
  provider: EtcdProviderName,
  endpoints: string[],
  members: EtcdMember[],
  dispose: () => Promise<void>,
): EtcdCluster {
  let closing: Promise<void> | undefined;
  // Every caller gets the same promise, so a second close waits for the first instead of racing.
  const close = (): Promise<void> => (closing ??= dispose());
  return Object.freeze({
    provider,
    endpoints: Object.freeze([...endpoints]) as string[],
    members: Object.freeze([...members]) as EtcdMember[],
    close,
    [Symbol.asyncDispose]: close,
  });
}
