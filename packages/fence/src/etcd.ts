/**
 * Fencing for data that lives in etcd itself.
 *
 * A lock's own guard (`lock.fencedWrite`) proves "this hold still owns its key". That is not
 * enough when one resource is written under several lock names, or outlives the lock's key
 * history: then the resource needs its own "highest token seen", as every other store does.
 * Here that is a fence key per resource holding the highest accepted token, compared and
 * advanced in the same etcd transaction as the user's puts and deletes.
 *
 * etcd compares values as bytes, so tokens are stored zero-padded to 20 digits: for such
 * strings byte order is numeric order, exact for all int64 tokens.
 *
 * @module @leasehold/fence/etcd
 */
import type { FencedOp, Leasehold } from '@leasehold/core';
import {
  fencedRequests,
  kvCall,
  LONE_SURROGATE,
  queuePrefixes,
  queueOf,
} from '@leasehold/core/internal';
import {
  checkFence,
  checkObject,
  checkResource,
  checkWrite,
  keysOf,
  type Fence,
  type FencedStore,
} from './contract.js';
import { invalid, StaleTokenError } from './errors.js';

/** Defaults for every option in this module, in one place. */
export const etcdDefaults = {
  /** Key prefix of fence keys and of values written by {@link etcdStore}. */
  prefix: '/leasehold/fence/',
} as const;

/** Options of {@link fencedTxn} and {@link etcdStore}; every field is optional. */
export interface EtcdFenceOptions {
  /** Key prefix for fence keys and for values written by the store. Default `/leasehold/fence/`. */
  prefix?: string;
  /** Deadline of each etcd call. Default: the client's `callTimeoutMs`. */
  timeoutMs?: number;
}

/** Every key of {@link EtcdFenceOptions}. */
const ETCD_FENCE_OPTION_KEYS = keysOf<EtcdFenceOptions>()(['prefix', 'timeoutMs']);

/**
 * A put or delete applied only if the token is accepted: the same shape as a hold's
 * `fencedWrite` ops, checked by the same rules. Its key is neither the fence key nor inside a
 * lock or election queue.
 */
export type EtcdFencedOp = FencedOp;

/** `{ resource, token }`, the ops to apply, and the module's options. */
export interface FencedTxn extends Fence, EtcdFenceOptions {
  /** The puts and deletes (at least one, each key once), applied with the fence check. */
  ops: readonly EtcdFencedOp[];
}

/** Every key of {@link FencedTxn}. */
const FENCED_TXN_KEYS = keysOf<FencedTxn>()(['resource', 'token', 'ops', 'prefix', 'timeoutMs']);

const WIDTH = 20;
/** A token as stored in a fence key: zero-padded to 20 digits, so byte order is numeric order. */
export const padToken = (token: bigint): string => token.toString().padStart(WIDTH, '0');

/** The keys and call options of `options`, already checked to be an object of known keys. */
function keys(options: EtcdFenceOptions) {
  const prefix = options.prefix ?? etcdDefaults.prefix;
  // An unpaired surrogate is U+FFFD on the wire: the queue checks, which compare strings, would
  // miss a fence key that lands in a queue spelled with U+FFFD.
  if (typeof prefix !== 'string' || prefix.includes('\0') || LONE_SURROGATE.test(prefix)) {
    throw invalid('options.prefix', 'a string without NUL or unpaired UTF-16 surrogates', prefix);
  }
  const timeoutMs = options.timeoutMs;
  if (timeoutMs !== undefined && !(Number.isSafeInteger(timeoutMs) && timeoutMs > 0)) {
    throw invalid('options.timeoutMs', 'a positive integer number of milliseconds', timeoutMs);
  }
  const encode = (resource: string) => encodeURIComponent(checkResource(resource));
  return {
    prefix,
    call: { ...(timeoutMs === undefined ? {} : { timeoutMs }) },
    fence: (resource: string) => `${prefix}token/${encode(resource)}`,
    value: (resource: string) => `${prefix}value/${encode(resource)}`,
  };
}

/**
 * Applies `ops` iff `token` >= the highest token accepted for `resource`, recording `token` as
 * the highest, in one etcd transaction. Resolves to the etcd revision of the write. Not retried:
 * a timed-out write may have landed.
 *
 * @throws StaleTokenError when the fence key holds a higher token; nothing was changed.
 *
 * @example
 * ```ts
 * await fencedTxn(client, {
 *   resource: 'config/prod',
 *   token: lock.token,
 *   ops: [{ type: 'put', key: '/config/prod/version', value: 'v42' }],
 * });
 * ```
 */
export async function fencedTxn(client: Leasehold, txn: FencedTxn): Promise<bigint> {
  const { resource, token } = checkFence(txn, { name: 'txn', allowed: FENCED_TXN_KEYS });
  const k = keys(txn);
  checkOutsideQueues(client, k.prefix);
  const fenceKey = Buffer.from(k.fence(resource));
  // The same checks as a hold's fenced write: keys outside the client's lock and election
  // queues (a lease-less key there would block that lock for good), each named once.
  const taken = new Map([
    [fenceKey.toString(), `the fence key of resource ${JSON.stringify(resource)}`],
  ]);
  const writes = [
    { request_put: { key: fenceKey, value: Buffer.from(padToken(token)) } },
    ...fencedRequests(txn.ops, queuePrefixes(client), taken),
  ];
  const res = await kvCall(
    client,
    'fenced write',
    (kv, o) =>
      kv.txn(
        {
          // Absent fence: any valid token is accepted. Present: accepted iff stored < token+1.
          compare: [{ key: fenceKey, target: 'Create', result: 'Equal', create_revision: '0' }],
          success: writes,
          failure: [
            {
              request_txn: {
                compare: [
                  {
                    key: fenceKey,
                    target: 'Value',
                    result: 'Less',
                    value: Buffer.from(padToken(token + 1n)),
                  },
                ],
                success: writes,
                failure: [{ request_range: { key: fenceKey } }],
              },
            },
          ],
        },
        o,
      ),
    { idempotent: false, ...k.call },
  );
  const inner = res.responses[0]?.response_txn;
  if (!res.succeeded && inner && !inner.succeeded) {
    const stored = inner.responses[0]?.response_range.kvs[0]?.value.toString();
    throw new StaleTokenError(resource, token, stored === undefined ? undefined : BigInt(stored));
  }
  return BigInt(res.header.revision);
}

/** A {@link FencedStore} in etcd, and where it keeps each resource. */
export interface EtcdStore extends FencedStore {
  /** The key prefix of its fence and value keys (`prefix` option, default `/leasehold/fence/`). */
  readonly prefix: string;
  /** The key holding the highest accepted token of `resource`. */
  fenceKey(resource: string): string;
  /** The key `write` stores the value of `resource` under. */
  valueKey(resource: string): string;
}

/**
 * Refuses a `prefix` under the client's lock or election prefix: its fence and value keys,
 * written without a lease, would sit among the queues (see core's fenced-write rules).
 */
function checkOutsideQueues(client: Leasehold, prefix: string): void {
  const reserved = queuePrefixes(client);
  // Fence keys are `<prefix>token/…`, values `<prefix>value/…`: either range inside a queue, or
  // containing a queue prefix, is refused.
  const ranges = [`${prefix}token/x`, `${prefix}value/x`];
  const under = reserved.find((p) =>
    ranges.some((r) => queueOf(r, [p]) !== undefined || p.startsWith(r.slice(0, -1))),
  );
  if (under === undefined) return;
  throw invalid(
    'options.prefix',
    `a prefix outside the client's lock and election prefixes (default ${etcdDefaults.prefix}): it overlaps ${JSON.stringify(under)}, where a fence key without a lease would sit among the queues`,
    prefix,
  );
}

/** No I/O here: the client is already connected. */
export function etcdStore(client: Leasehold, options: EtcdFenceOptions = {}): EtcdStore {
  checkObject('options', options, '{ prefix?, timeoutMs? }', ETCD_FENCE_OPTION_KEYS);
  const k = keys(options);
  checkOutsideQueues(client, k.prefix);

  /** Reads keys at one revision (one read-only txn), so a value and its token agree. */
  const get = async (names: string[]): Promise<(Buffer | undefined)[]> => {
    const res = await kvCall(
      client,
      'fence read',
      (kv, o) =>
        kv.txn(
          {
            compare: [],
            success: names.map((name) => ({ request_range: { key: Buffer.from(name) } })),
            failure: [],
          },
          o,
        ),
      { idempotent: true, ...k.call },
    );
    return names.map((_, i) => res.responses[i]?.response_range.kvs[0]?.value);
  };

  return {
    prefix: k.prefix,
    fenceKey: k.fence,
    valueKey: k.value,
    async write(write) {
      const { resource, value } = checkWrite(write);
      await fencedTxn(client, {
        ...options,
        resource,
        token: write.token,
        ops: [{ type: 'put', key: k.value(resource), value }],
      });
    },
    async read(resource) {
      const [value, fence] = await get([k.value(resource), k.fence(resource)]);
      if (value === undefined || fence === undefined) return undefined;
      return { value: value.toString(), token: BigInt(fence.toString()) };
    },
    async highestToken(resource) {
      const [fence] = await get([k.fence(resource)]);
      return fence === undefined ? undefined : BigInt(fence.toString());
    },
  };
}
