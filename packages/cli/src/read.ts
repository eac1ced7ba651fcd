/**
 * Raw reads of lock and election keys, through the SDK's `kvCall` so that each one has a
 * deadline, is retried as reads are, and is checked against the cluster met at connect.
 */
import type { Leasehold } from '@leasehold/core';
import { kvCall } from '@leasehold/core/internal';
import { prefixEnd } from './keys.js';

/** One key of a queue (a lock holder or waiter, an election candidate). */
export interface Entry {
  key: string;
  value: string;
  /** The key's create revision: its fencing token once first in its queue. */
  token: bigint;
  leaseId: bigint;
}

/** Keys per page: values are at most 64 KiB, so a page stays well under gRPC's 4 MiB. */
const PAGE = 50;

/**
 * Every key under `prefix`, read at one revision (page by page), in key order. Resolves with
 * the revision read at.
 */
export async function readPrefix(
  client: Leasehold,
  prefix: string,
): Promise<{ entries: Entry[]; revision: bigint }> {
  const end = prefixEnd(prefix);
  const entries: Entry[] = [];
  let from = Buffer.from(prefix);
  let revision: string | undefined;
  for (;;) {
    const res = await kvCall(
      client,
      'range',
      (kv, options) =>
        kv.range(
          {
            key: from,
            range_end: end,
            limit: PAGE,
            ...(revision === undefined ? {} : { revision }),
          },
          options,
        ),
      { idempotent: true },
    );
    revision ??= res.header.revision;
    for (const kv of res.kvs) {
      entries.push({
        key: kv.key.toString(),
        value: kv.value.toString(),
        token: BigInt(kv.create_revision),
        leaseId: BigInt(kv.lease),
      });
    }
    const last = res.kvs.at(-1);
    if (!res.more || last === undefined) return { entries, revision: BigInt(revision) };
    from = Buffer.concat([last.key, Buffer.from([0])]);
  }
}

/** Sorts a queue's entries by create revision: the first is the holder (or leader). */
export function inQueueOrder(entries: Entry[]): Entry[] {
  return [...entries].sort((a, b) => (a.token < b.token ? -1 : a.token > b.token ? 1 : 0));
}
