/**
 * A queue is the direct children of its prefix, also when a nested queue is large: leader() and
 * observe() of the outer election read past a nested election of 70 candidates with values of
 * MAX_VALUE_BYTES (over 4 MiB in all, beyond gRPC's message limit in one answer), in pages.
 */
import { connect, type Leasehold } from '@leasehold/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
const base = uniquePrefix('nested-queue-size');
const electionPrefix = `${base}election/`;
let outer: Leasehold;
let candidate: Leasehold;

beforeAll(async () => {
  const open = () => connect({ endpoints, lockPrefix: `${base}lock/`, electionPrefix });
  [outer, candidate] = await Promise.all([open(), open()]);
});
afterAll(async () => {
  await Promise.all([outer.close(), candidate.close()]);
  await admin.delete().prefix(base);
  admin.close();
});

/** `p`, or `fallback` after `ms`. */
const within = <T>(p: Promise<T>, ms: number, fallback: T): Promise<T> =>
  Promise.race([p, new Promise<T>((resolve) => setTimeout(() => resolve(fallback), ms))]);

describe('a large nested queue under an election', () => {
  it('leader() and observe() of the outer election answer while a nested election has 70 candidates of 64 KiB', async () => {
    // The nested client's election `x` (electionPrefix `<electionPrefix>a/`), created first.
    const lease = admin.lease(60);
    const id = BigInt(await lease.grant());
    const value = Buffer.alloc(64 * 1024, 0x61); // MAX_VALUE_BYTES
    for (let i = 0; i < 70; i++) {
      await lease.put(`${electionPrefix}a/x/${(id + BigInt(i)).toString(16)}`).value(value);
    }
    try {
      const leadership = await candidate.campaign('a', 'outer', { timeoutMs: 10_000 });
      const leader = await outer.leader('a').then(
        (h) => h?.key,
        (e: unknown) => `${(e as Error).name}: ${(e as Error).message}`,
      );
      const states = outer.observe('a');
      const first = await within(
        states.next().then((r) => (r.done ? 'ended' : r.value.leader?.key)),
        10_000,
        'no state within 10 s',
      );
      await states.return?.();
      await leadership.resign();
      expect({ leader, first }).toEqual({ leader: leadership.key, first: leadership.key });
    } finally {
      await lease.revoke();
    }
  });
});
