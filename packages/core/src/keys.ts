/**
 * Key arithmetic every queue read agrees on, shared with leasehold's other packages through
 * `@leasehold/core/internal`: where a prefix's range ends, which queue a key belongs to, and the
 * paged read of a whole prefix at one revision.
 */
import type { IKeyValue, IRangeRequest, IRangeResponse } from 'etcd3';

/** First key after every key that starts with `prefix`: the end of a prefix range. */
export function prefixEnd(prefix: string | Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]); // all 0xff: etcd's "to the end of the keyspace"
}

/** The queue a key belongs to: `<prefix><segment>/` for `<prefix><segment>/<lease hex>`. */
export const rangeOf = (key: string): string => key.slice(0, key.lastIndexOf('/') + 1);

/**
 * Every key under `prefix` at one revision, in key order, read in pages of `pageKeys` (so each
 * answer stays far below gRPC's message limit) through `range` (a call with a deadline and the
 * client's checks). Resolves with the revision read at.
 */
export async function readPrefix(
  range: (request: IRangeRequest) => Promise<IRangeResponse>,
  prefix: string,
  options: { keysOnly: boolean; pageKeys: number },
): Promise<{ kvs: IKeyValue[]; readAt: bigint }> {
  const kvs: IKeyValue[] = [];
  const rangeEnd = prefixEnd(prefix);
  let from = Buffer.from(prefix);
  for (let readAt: bigint | undefined; ;) {
    const res = await range({
      key: from,
      range_end: rangeEnd,
      keys_only: options.keysOnly,
      limit: options.pageKeys,
      ...(readAt === undefined ? {} : { revision: readAt.toString() }),
    });
    readAt ??= BigInt(res.header.revision);
    kvs.push(...res.kvs);
    if (!res.more || res.kvs.length === 0) return { kvs, readAt };
    from = Buffer.concat([res.kvs.at(-1)!.key, Buffer.from([0])]);
  }
}
