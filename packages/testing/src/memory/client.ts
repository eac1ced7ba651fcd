/**
 * `memoryClient()`: a `Leasehold` client on an in-memory etcd, made by core's own `connect()`
 * logic (every option is checked as `connect()` checks it), so locks, sessions, elections and
 * the rest are the SDK's real code running on memory instead of gRPC.
 */
import type { ConnectOptions, Leasehold } from '@leasehold/core';
import { checkOptions, connectOptionNames, connectWith } from '@leasehold/core/internal';
import { MemoryEtcd } from './etcd.js';
import { invalid, invalidSecret } from './invalid.js';
import { serverOf } from './registry.js';

/**
 * Options of `memoryClient()`: `connect()`'s options without those of a network (`endpoints`,
 * `tls`, `auth`), with the same defaults, plus the etcd to connect to.
 */
export interface MemoryClientOptions extends Omit<
  ConnectOptions,
  'endpoints' | 'tls' | 'auth' | 'clock'
> {
  /**
   * The etcd to connect to: clients on one etcd see each other's locks and elections, and share
   * its clock. Default: a new etcd of this client's own.
   */
  etcd?: MemoryEtcd;
}

/** Options of `connect()` that a memory client has no use for, and why. */
const NOT_HERE: Record<string, string> = {
  endpoints: 'a memory client talks to its etcd option, not to endpoints',
  tls: 'a memory client has no network to secure',
  auth: 'the memory etcd does not model authentication',
  clock: "the memory etcd's clock is used (etcd.clock)",
};

const OPTIONS: (keyof MemoryClientOptions)[] = [
  'etcd',
  ...connectOptionNames.filter(
    (name): name is Exclude<typeof name, 'endpoints' | 'tls' | 'auth'> => !(name in NOT_HERE),
  ),
];

/**
 * A client on `options.etcd` (a new `MemoryEtcd` if not given), with the same interface and
 * behaviour as one from `connect()`. Time only moves with `etcd.clock.advance(ms)`.
 */
export async function memoryClient(options: MemoryClientOptions = {}): Promise<Leasehold> {
  if (typeof options === 'object' && options !== null) {
    for (const key of Object.keys(options)) {
      const why = NOT_HERE[key];
      if (why)
        throw invalidSecret(
          `options.${key}`,
          `left out: ${why}`,
          (options as Record<string, unknown>)[key],
        );
    }
  }
  const { etcd = new MemoryEtcd(), ...rest } = checkOptions(options, OPTIONS);
  const server = serverOf(etcd);
  if (!server) throw invalid('options.etcd', 'a MemoryEtcd from memoryEtcd()', etcd);
  const process = server.process();
  const client = await connectWith(
    { client: server.wire(process), endpoint: server.endpoint },
    { ...rest, clock: process.clock },
  );
  server.attach(client, process);
  return client;
}
