/**
 * `@leasehold/testing/memory`: the SDK on an etcd in memory, for unit tests that run in
 * milliseconds. {@link memoryClient} returns the same `Leasehold` client `connect()` does, running
 * core's real lock, session and election logic; {@link MemoryEtcd} is the etcd behind it, with a
 * clock the test moves, pausable client processes and planted faults. What it does not model
 * (the network, several members, auth, real timing) is listed in the package README.
 *
 * @example
 * ```ts
 * import { memoryClient } from '@leasehold/testing/memory';
 *
 * const client = await memoryClient();
 * const lock = await client.acquire('job');
 * console.log(lock.token); // a bigint, as against etcd
 * await client.close();
 * ```
 *
 * @packageDocumentation
 */
export { memoryClient, type MemoryClientOptions } from './memory/client.js';
export {
  MemoryEtcd,
  memoryEtcd,
  type MemoryEtcdOptions,
  type MemoryKey,
  type TestClock,
  type TestFaults,
} from './memory/etcd.js';
export type { FailOptions, FaultTarget, HangOptions } from './memory/faults.js';
