/**
 * fencedTxn's key checks (core's shared validator, core/fenced-ops.ts): its own fence key, keys of
 * a client nested in another's queue, and keys that differ only in lone surrogates are refused at
 * the call, so nothing without a lease reaches a lock queue.
 */
import { connect, isInvalidArgumentError, type Leasehold } from '@leasehold/core';
import { isInvalidArgumentError as fenceIsInvalidArgumentError } from '@leasehold/fence';
import { fencedTxn } from '@leasehold/fence/etcd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
const base = uniquePrefix('etcd-fence-keys');
const lockPrefix = `${base}lock/`;
let client: Leasehold;
let other: Leasehold;

beforeAll(async () => {
  const open = () => connect({ endpoints, lockPrefix, electionPrefix: `${base}election/` });
  [client, other] = await Promise.all([open(), open()]);
});
afterAll(async () => {
  await Promise.all([client.close(), other.close()]);
  await admin.delete().prefix(base);
  admin.close();
});

describe('fencedTxn: the fence key itself is not checked against the queues', () => {
  it('a prefix option equal to the lock prefix is refused before the fence key lands in the queue of lock "token"', async () => {
    const err = await fencedTxn(client, {
      resource: 'r',
      token: 5n,
      prefix: lockPrefix,
      ops: [{ type: 'put', key: `${base}data/x`, value: 'v' }],
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    // What happens instead: the txn writes `<lockPrefix>token/r` without a lease.
    const holder = await other.holder('token');
    expect({ refused: isInvalidArgumentError(err), holder: holder?.key }).toEqual({
      refused: true,
      holder: undefined,
    });
  });
});

describe('nested prefixes: a client nested in another client\u2019s queue writes into it', () => {
  it("a nested client's fenced writes into the outer client's queue do not block the outer lock (no lease: not a member)", async () => {
    const nested = await connect({
      endpoints,
      lockPrefix: `${base}nested-lock/`,
      // The election queues of this client are inside the range of the outer lock `jobs`.
      electionPrefix: `${lockPrefix}jobs/`,
    });
    try {
      const leadership = await nested.campaign('x', 'inner');
      // Directly under the nested client's own prefix, so in none of its queues: allowed.
      await leadership.put(`${lockPrefix}jobs/config`, 'v');
      await fencedTxn(nested, {
        resource: 'r',
        token: leadership.token,
        ops: [{ type: 'put', key: `${lockPrefix}jobs/other`, value: 'v' }],
      });
      await leadership.resign();
      // The lease-less keys sit in the outer lock's range, yet they are not its holders.
      expect(await client.holder('jobs')).toBeUndefined();
      await (await client.tryAcquire('jobs')).release();
    } finally {
      await nested.close();
    }
  });
});

describe('keys named twice, spelled differently', () => {
  it('two keys with different lone surrogates (the same bytes on the wire) are refused at the call with InvalidArgumentError', async () => {
    const lock = await client.acquire('dup');
    try {
      const err = await lock
        .fencedWrite([
          { type: 'put', key: `${base}data/x\uD800`, value: '1' },
          { type: 'put', key: `${base}data/x\uDC00`, value: '2' },
        ])
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      // What happens instead: etcd refuses the sent txn ("duplicate key given in txn request").
      expect({
        invalid: isInvalidArgumentError(err),
        fence: fenceIsInvalidArgumentError(err),
      }).toEqual({
        invalid: true,
        fence: true,
      });
    } finally {
      await lock.release();
    }
  });
});
