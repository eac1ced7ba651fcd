/**
 * Real etcd for tests: an external cluster, a local `etcd` binary, or containers through
 * testcontainers, with 1 or 3 members to stop, kill, pause, restart, snapshot and restore; and a
 * TCP fault proxy ({@link TcpFaultProxy}) that stalls, delays or resets connections. Start with
 * {@link startEtcd}.
 *
 * @example
 * ```ts
 * import { startEtcd } from '@leasehold/testing';
 *
 * await using etcd = await startEtcd({ members: 3, provider: 'local' });
 * await etcd.members[0]!.kill(); // the other two keep serving
 * await etcd.members[0]!.start(); // same URL, same data
 * ```
 *
 * @module @leasehold/testing
 */
export type {
  EtcdCluster,
  EtcdMember,
  EtcdProviderChoice,
  EtcdProviderName,
  RestoreOptions,
  StartEtcdOptions,
} from './types.js';
export { startEtcd } from './start-etcd.js';
export { resolveEtcdProvider } from './provider.js';
export { freePort } from './free-port.js';
export { TcpFaultProxy, type FaultMode, type TcpFaultProxyOptions } from './tcp-fault-proxy.js';
export { EtcdHarnessError, isEtcdHarnessError, type EtcdHarnessErrorCode } from './errors.js';
export { DEFAULT_ETCD_IMAGE } from './options.js';
