import { startBinaryCluster } from './binary-provider.js';
import { makeCluster } from './cluster.js';
import { startContainerCluster } from './container-provider.js';
import { findEngine } from './engine.js';
import { EtcdHarnessError } from './errors.js';
import { findEtcdBinary } from './find-binary.js';
import { parseEndpoints, resolveOptions, type ResolvedEtcdOptions } from './options.js';
import { binaryHint, selectProvider, systemProbes } from './provider.js';
import type { EtcdCluster, StartEtcdOptions } from './types.js';

// A free port can be taken by someone else between our probe and etcd's bind; that race is the
// only startup failure worth retrying, with fresh ports.
const PORT_RACE = /address already in use/i;
const MAX_ATTEMPTS = 3;

/**
 * Starts (or, for 'external', connects to) an etcd for tests. Close the result, or use
 * `await using`, to remove everything it started.
 *
 * @throws {@link EtcdHarnessError} with code `ETCD_INVALID_OPTION` for an option or environment
 *   value that is not allowed, `ETCD_UNAVAILABLE` when no provider can be used (or the one asked
 *   for is missing), `ETCD_STARTUP_FAILED` when etcd exits or fails while starting, `ETCD_TIMEOUT`
 *   when it is not healthy in time, `ETCD_ENGINE_ERROR` when the container engine refuses a call.
 *
 * @example
 * ```ts
 * import { startEtcd, type EtcdCluster } from '@leasehold/testing';
 *
 * let etcd: EtcdCluster;
 * beforeAll(async () => {
 *   etcd = await startEtcd({ members: 3, provider: 'local' });
 * });
 * afterAll(() => etcd.close());
 * ```
 */
export async function startEtcd(options: StartEtcdOptions = {}): Promise<EtcdCluster> {
  const resolved = resolveOptions(options);
  resolved.signal?.throwIfAborted();
  const provider = await selectProvider(
    resolved.provider,
    systemProbes(resolved.binary),
    binaryHint(resolved.binary),
    (line) => {
      resolved.log(`[leasehold/testing] ${line}`);
      warnOnce(line);
    },
  );
  resolved.log(`[leasehold/testing] etcd provider: ${provider} (requested '${resolved.provider}')`);
  if (provider === 'external') {
    const endpoints = parseEndpoints(process.env.ETCD_ENDPOINTS);
    resolved.log(`[leasehold/testing] etcd external: ${endpoints.join(',')}`);
    // Not ours: nothing to stop or remove on close, and nothing we may restore.
    return makeCluster({
      provider: 'external',
      endpoints,
      members: [],
      dispose: async () => {},
      restore: async () => {
        throw new EtcdHarnessError(
          'ETCD_INVALID_OPTION',
          `cannot restore the external cluster at ${endpoints.join(',')}: the harness does not own ` +
            "it and cannot stop it. Start a cluster of the test's own with provider 'local'",
        );
      },
    });
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOwned(provider, resolved);
    } catch (error) {
      const retry =
        attempt < MAX_ATTEMPTS &&
        !resolved.signal?.aborted &&
        error instanceof Error &&
        PORT_RACE.test(error.message);
      if (!retry) throw error;
      resolved.log(`[leasehold/testing] port taken during startup, retrying with new ports`);
    }
  }
}

const warned = new Set<string>();

/**
 * A fallback the caller did not ask for is a process warning too (once per message), so it shows
 * without a `log` option.
 */
function warnOnce(line: string): void {
  if (warned.has(line)) return;
  warned.add(line);
  process.emitWarning(line, { code: 'LEASEHOLD_TESTING_PROVIDER' });
}

async function startOwned(
  provider: 'container' | 'binary',
  options: ResolvedEtcdOptions,
): Promise<EtcdCluster> {
  if (provider === 'container') {
    const engine = await findEngine();
    if (!engine) throw new EtcdHarnessError('ETCD_UNAVAILABLE', 'the container engine went away');
    return startContainerCluster(options, engine);
  }
  const binary = await findEtcdBinary(options.binary);
  if (!binary) throw new EtcdHarnessError('ETCD_UNAVAILABLE', 'the etcd binary went away');
  return startBinaryCluster(options, binary);
}
