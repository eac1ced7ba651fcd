import { InvalidArgumentError } from './errors.js';
import { describe, MAX_NAME_LENGTH } from './options.js';

/**
 * Turns a lock or election name into its key segment.
 *
 * Keys are `<prefix><segment>/<lease id hex>`, and waiters scan the range `<prefix><segment>/`.
 * Unencoded, the range of `jobs` would contain the keys of `jobs/a`, and the two locks would
 * block each other (a known flaw of etcd's Go recipe). Escaping `/` (and `%`, to stay reversible)
 * keeps every name's range its own, while names without those characters are unchanged, so
 * `etcdctl lock <prefix>jobs` and Go's `concurrency.NewMutex(s, "<prefix>jobs")` contend with
 * leasehold's lock `jobs`.
 */
export function encodeName(name: unknown): string {
  if (
    typeof name !== 'string' ||
    name.length === 0 ||
    name.length > MAX_NAME_LENGTH ||
    name.includes('\0')
  ) {
    throw new InvalidArgumentError(
      `name must be a non-empty string of at most ${MAX_NAME_LENGTH} characters without NUL, got ${describe(
        typeof name === 'string' && name.length > 64
          ? `${name.slice(0, 64)}… (${name.length} characters)`
          : name,
      )}`,
    );
  }
  return name.replace(/%/g, '%25').replace(/\//g, '%2F');
}

/** First key after every key that starts with `prefix`: the end of a prefix range. */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  // All 0xff: etcd's "to the end of the keyspace".
  return Buffer.from([0]);
}
