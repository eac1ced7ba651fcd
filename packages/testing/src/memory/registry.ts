/**
 * What `memoryClient()` needs of a `MemoryEtcd` beyond its public members, kept out of the
 * class's declared API: a new process, its wire to the etcd, and the record of which client runs
 * in which process (for `pause`/`resume`).
 */
import type { Leasehold } from '@leasehold/core';
import type { WireClient } from '@leasehold/core/internal';
import type { MemoryProcess } from './process.js';

export interface Server {
  /** Names the etcd in error messages, where `connect()` names endpoints. */
  endpoint: string;
  process(): MemoryProcess;
  wire(process: MemoryProcess): WireClient;
  attach(client: Leasehold, process: MemoryProcess): void;
}

const servers = new WeakMap<object, Server>();

export const register = (etcd: object, server: Server): void => void servers.set(etcd, server);

export const serverOf = (etcd: unknown): Server | undefined =>
  typeof etcd === 'object' && etcd !== null ? servers.get(etcd) : undefined;
