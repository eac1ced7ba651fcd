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
