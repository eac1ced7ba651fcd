/**
 * Raw reads of lock and election keys, through the SDK's `kvCall` so that each one has a
 * deadline, is retried as reads are, and is checked against the cluster met at connect.
 */
import type { Leasehold } from '@leasehold/core';
import { readAll } from '@leasehold/core/internal';

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
 * Every key under `prefix`, read at one revision (page by page, through core's shared paged
 * read), in key order. Resolves with the revision read at.
 */
export async function readPrefix(
  client: Leasehold,
  prefix: string,
): Promise<{ entries: Entry[]; revision: bigint }> {
  const { kvs, readAt } = await readAll(client, prefix, { pageKeys: PAGE });
  const entries = kvs.map((kv) => ({
    key: kv.key.toString(),
    value: kv.value.toString(),
    token: BigInt(kv.create_revision),
    leaseId: BigInt(kv.lease),
  }));
  return { entries, revision: readAt };
}

/**
 * A queue's members by create revision: the first is the holder (or leader). A key without a
 * lease is not a member (core never counts one: every holder and candidate has a lease).
 */
export function inQueueOrder(entries: Entry[]): Entry[] {
  return entries
    .filter((e) => e.leaseId !== 0n)
    .sort((a, b) => (a.token < b.token ? -1 : a.token > b.token ? 1 : 0));
}
