import { EtcdHarnessError } from './errors.js';
import { unknownKey } from './known-keys.js';
import type { EtcdCluster, EtcdMember, EtcdProviderName, RestoreOptions } from './types.js';

export interface ClusterParts {
  provider: EtcdProviderName;
  endpoints: string[];
  members: EtcdMember[];
  /** Removes everything the provider started. Called once. */
  dispose: () => Promise<void>;
  /**
   * The provider's restore (`clusterToken`: the `--initial-cluster-token` to restore under, when
   * not the cluster's own); `makeCluster` checks the options and serialises it with itself and
   * with `close`.
   */
  restore: (snapshotPath: string, clusterToken?: string) => Promise<void>;
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
  const restore = async (snapshotPath: string, options: RestoreOptions = {}): Promise<void> => {
    const clusterToken = restoreToken(options);
    if (closing) {
      throw new EtcdHarnessError('ETCD_INVALID_OPTION', 'cannot restore: the cluster is closed');
    }
    if (restoring) {
      throw new EtcdHarnessError(
        'ETCD_INVALID_OPTION',
        'cannot restore: another restore of this cluster is still running',
      );
    }
    const run = parts.restore(snapshotPath, clusterToken);
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

/** `options.clusterToken`, checked: etcd puts it into member IDs, so no separators or blanks. */
function restoreToken(options: RestoreOptions): string | undefined {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `restore options must be an object such as { clusterToken: 'rebuilt-1' }, got ${JSON.stringify(options) ?? String(options)}`,
    );
  }
  const unknown = unknownKey('restore options', options, [
    'clusterToken',
  ] satisfies (keyof RestoreOptions)[]);
  if (unknown) throw new EtcdHarnessError('ETCD_INVALID_OPTION', unknown);
  const { clusterToken } = options;
  if (
    clusterToken !== undefined &&
    (typeof clusterToken !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(clusterToken))
  ) {
    throw new EtcdHarnessError(
      'ETCD_INVALID_OPTION',
      `restore options.clusterToken must be 1 to 64 letters, digits, '.', '_' or '-', got ${JSON.stringify(clusterToken) ?? String(clusterToken)}`,
    );
  }
  return clusterToken;
}
