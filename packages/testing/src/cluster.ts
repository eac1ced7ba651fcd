import { EtcdHarnessError } from './errors.js';
import type { EtcdCluster, EtcdMember, EtcdProviderName } from './types.js';

export interface ClusterParts {
  provider: EtcdProviderName;
  endpoints: string[];
  members: EtcdMember[];
  /** Removes everything the provider started. Called once. */
  dispose: () => Promise<void>;
  /** The provider's restore; `makeCluster` serialises it with itself and with `close`. */
  restore: (snapshotPath: string) => Promise<void>;
}

/**
 * Wraps provider-specific parts into a cluster whose `close` is idempotent (`await using` calls
 * it too) and never runs while a restore is replacing members: `close` waits for the restore
 * (bounded by its own deadlines) and then removes everything, including what the restore made.
 */
export function makeCluster(parts: ClusterParts): EtcdCluster {
  let closing: Promise<void> | undefined;
  let restoring: Promise<void> | undefined;
  // Every caller gets the same promise, so a second close waits for the first instead of racing.
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      await restoring?.catch(() => {});
      await parts.dispose();
    })());
  const restore = async (snapshotPath: string): Promise<void> => {
    if (closing) {
      throw new EtcdHarnessError('ETCD_INVALID_OPTION', 'cannot restore: the cluster is closed');
    }
    if (restoring) {
      throw new EtcdHarnessError(
        'ETCD_INVALID_OPTION',
        'cannot restore: another restore of this cluster is still running',
      );
    }
    const run = parts.restore(snapshotPath);
    restoring = run;
    try {
      await run;
    } finally {
      restoring = undefined;
    }
  };
  return Object.freeze({
    provider: parts.provider,
    endpoints: Object.freeze([...parts.endpoints]) as string[],
    members: Object.freeze([...parts.members]) as EtcdMember[],
    restore,
    close,
    [Symbol.asyncDispose]: close,
  });
}
