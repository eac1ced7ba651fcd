/**
 * `@leasehold/core/internal`: for leasehold's own packages only (e.g. `@leasehold/fence/etcd`).
 * Not part of the public API: left out of the API reference, and free to change in any release
 * without notice. Applications use `@leasehold/core`. (It is marked so in words, not with the
 * TSDoc tag: core builds with `stripInternal`, and the tag on this comment would drop the import
 * below from the emitted declarations.)
 */
import type { IKeyValue, IResponseHeader, KVClient } from 'etcd3';
import type { Leasehold } from './client.js';
import { readPrefix } from './keys.js';
import { newLease } from './session.js';

// The helpers sibling packages share with core, so that none keeps a copy that drifts.
export { checkOnRead, Listeners, LossLatch } from './latch.js';
export { prefixEnd, rangeOf } from './keys.js';
export {
  checkOptions,
  describe as describeValue,
  describeType,
  encodeName,
  invalid,
  invalidSecret,
  LONE_SURROGATE,
  redactEndpoint,
} from './options.js';

/**
 * Runs one etcd KV call through a client with every check its own calls get: the client must be
 * open and on its original cluster, the call has a deadline, only `idempotent` calls are retried,
 * and an answer from a foreign or rewound cluster is never handed on.
 */
export function kvCall<T extends { header?: IResponseHeader }>(
  client: Leasehold,
  what: string,
  run: (kv: KVClient, options: { deadline: number }) => Promise<T>,
  opts: { idempotent: boolean; timeoutMs?: number },
): Promise<T> {
  const etcd = client.etcd;
  return etcd.call(what, (o) => run(etcd.client.kv, o), opts);
}

/**
 * Grants a lease that nobody keeps alive and no session owns: it simply expires after its TTL
 * (what `@leasehold/cron` puts its retained records on). Retried like an idempotent call: a grant
 * whose answer was lost leaves a lease that holds nothing and expires by itself.
 */
export async function grantLease(
  client: Leasehold,
  what: string,
  ttlSeconds: number,
): Promise<{ leaseId: bigint; ttlSeconds: number; revision: bigint }> {
  return newLease(client.etcd, what, ttlSeconds, true);
}

/**
 * A counter on the client's meter (`connect({ telemetry })`'s provider, else the global one),
 * for a package's own metrics. Counting never throws.
 */
export function counter(
  client: Leasehold,
  name: string,
  options: { description: string; unit: string },
): (attributes?: Record<string, string>) => void {
  const meter = client.etcd.telemetry.meter;
  let instrument: { add(value: number, attributes?: Record<string, string>): void } | undefined;
  try {
    instrument = meter.createCounter(name, options);
  } catch {
    instrument = undefined;
  }
  return (attributes) => {
    try {
      instrument?.add(1, attributes);
    } catch {
      // a broken provider loses a data point, never the run
    }
  };
}

/** The client's `callTimeoutMs`: the deadline of each etcd call it makes. */
export const callTimeoutMs = (client: Leasehold): number => client.etcd.options.callTimeoutMs;

/** Aborts when `client` is closed: a package's background work (timers, loops) stops with it. */
export const closedSignal = (client: Leasehold): AbortSignal => client.closed;

export { fencedRequests, queueOf } from './fenced-ops.js';
export { connectOptionNames, connectWith } from './connect.js';
export type { Clock } from './clock.js';
export * from './transport/wire.js';

/** The key prefixes of every queue of `client` (its locks and elections). */
export const queuePrefixes = (client: Leasehold): readonly string[] => [
  client.lockPrefix,
  client.electionPrefix,
];

/**
 * Every key under `prefix` at one revision (in pages of `pageKeys`, with values unless
 * `keysOnly`), through the client's checked, retried reads. Resolves with the revision read at.
 */
export function readAll(
  client: Leasehold,
  prefix: string,
  options: { keysOnly?: boolean; pageKeys: number },
): Promise<{ kvs: IKeyValue[]; readAt: bigint }> {
  return readPrefix((request) => client.etcd.range('range', request), prefix, {
    keysOnly: options.keysOnly ?? false,
    pageKeys: options.pageKeys,
  });
}
