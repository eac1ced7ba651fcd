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
