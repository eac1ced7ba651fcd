/**
 * Lock and election keys as @leasehold/core writes them: `<prefix><segment>/<lease id hex>`,
 * where the segment is the name with `%` → `%25` and `/` → `%2F` (core's `encodeName`), so the
 * range of `jobs` never holds the keys of `jobs/a`. Names without `/` or `%` are their own
 * segment, which is why `etcdctl lock <prefix>jobs` shares the lock `jobs`. The encoding is
 * core's own (`encodeName`, shared through `@leasehold/core/internal`).
 */
import { encodeName } from '@leasehold/core/internal';

/** The inverse of core's `encodeName`; other `%` sequences are left as they are. */
export function decodeName(segment: string): string {
  return segment.replace(/%2F/gi, '/').replace(/%25/g, '%');
}

/** The range that holds every queue key of `name`: `<prefix><segment>/`. */
export function queueRange(prefix: string, name: string): string {
  return `${prefix}${encodeName(name)}/`;
}

/** A key of a lock or election queue, taken apart. */
export interface QueueKey {
  /** The decoded lock or election name. */
  name: string;
  /** The lease id in lowercase hex, as in the key. */
  leaseHex: string;
}

/**
 * Splits `key` (which starts with `prefix`) into its name and lease id; `undefined` for a key
 * that is not `<segment>/<hex>` below the prefix (not written by leasehold, etcdctl or Go's
 * concurrency package).
 */
export function parseQueueKey(prefix: string, key: string): QueueKey | undefined {
  if (!key.startsWith(prefix)) return undefined;
  const rest = key.slice(prefix.length);
  const slash = rest.lastIndexOf('/');
  if (slash <= 0) return undefined;
  const leaseHex = rest.slice(slash + 1);
  if (!/^[0-9a-f]{1,16}$/.test(leaseHex)) return undefined;
  return { name: decodeName(rest.slice(0, slash)), leaseHex };
}

/** A lease id (decimal string or bigint, as etcd answers) in the lowercase hex of keys. */
export function leaseHex(id: string | bigint): string {
  return BigInt(id).toString(16);
}
