/**
 * The one check of a fenced write's operations, for a hold's `fencedWrite` and for
 * `@leasehold/fence/etcd`'s `fencedTxn` alike: a non-empty array of puts and deletes, each key
 * outside every lock and election queue (`reserved`: the client's prefixes), without unpaired
 * surrogates, and named once (`taken`: keys the txn itself writes besides, with what they are,
 * such as a resource's fence key). Returns the txn's requests; throws `InvalidArgumentError`
 * naming the op before anything is sent.
 */
import type { IRequestOp } from 'etcd3';
import { invalid, LONE_SURROGATE } from './options.js';

/**
 * The queue (`<prefix><name>/`, under one of the `reserved` prefixes) that `key` lies inside, if
 * any. leasehold never counts a key without a lease into a queue, but etcd's Go recipes and
 * `etcdctl` do: a fenced write there would block that lock or election for them for good. Keys
 * directly under a prefix (`<lockPrefix>data`, no further `/`) are in no queue.
 */
export function queueOf(key: string, reserved: readonly string[]): string | undefined {
  const prefix = reserved.find((p) => key.startsWith(p) && key.includes('/', p.length));
  return prefix === undefined ? undefined : key.slice(0, key.indexOf('/', prefix.length) + 1);
}

export function fencedRequests(
  ops: unknown,
  reserved: readonly string[],
  taken: ReadonlyMap<string, string> = new Map(),
): IRequestOp[] {
  if (!Array.isArray(ops) || ops.length === 0) {
    throw invalid('ops', 'a non-empty array of fenced operations', ops);
  }
  const seen = new Set<string>();
  return ops.map((op: unknown, i) => {
    const o = (op ?? {}) as Partial<{ type: unknown; key: unknown; value: unknown }>;
    if (typeof o.key !== 'string' || o.key === '') {
      throw invalid(`ops[${i}].key`, 'a non-empty string', o.key);
    }
    const key = o.key;
    if (LONE_SURROGATE.test(key)) {
      // Two such keys differ here and are the same bytes on the wire (each lone half is U+FFFD).
      throw invalid(`ops[${i}].key`, 'a string without unpaired UTF-16 surrogates', o.key);
    }
    const queue = queueOf(key, reserved);
    if (queue !== undefined) {
      throw invalid(
        `ops[${i}].key`,
        `a key outside the lock and election queues (it is inside the queue ${JSON.stringify(queue)}, where a key without a lease would block that lock or election for etcdctl and Go clients for good); keep your data elsewhere, and end a hold with release() or resign()`,
        o.key,
      );
    }
    const own = taken.get(key);
    if (own !== undefined) {
      throw invalid(
        `ops[${i}].key`,
        `a key the write does not name itself (it is ${own}, which the same txn writes)`,
        o.key,
      );
    }
    if (seen.has(key)) {
      throw invalid(
        `ops[${i}].key`,
        'a key no other op of the write names (etcd refuses a txn that names a key twice)',
        o.key,
      );
    }
    seen.add(key);
    const bytes = Buffer.from(key);
    if (o.type === 'delete') return { request_delete_range: { key: bytes } };
    if (o.type !== 'put') throw invalid(`ops[${i}].type`, '"put" or "delete"', o.type);
    if (typeof o.value !== 'string' && !(o.value instanceof Uint8Array)) {
      throw invalid(`ops[${i}].value`, 'a string or Uint8Array', o.value);
    }
    return { request_put: { key: bytes, value: Buffer.from(o.value) } };
  });
}
