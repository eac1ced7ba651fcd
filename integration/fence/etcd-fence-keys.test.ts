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
  it("a hold's fenced write of a sibling of its own queues (a direct child of the outer lock's queue) is refused", async () => {
    const nested = await connect({
      endpoints,
      lockPrefix: `${base}nested-lock/`,
      // The election queues of this client are inside the range of the outer lock `jobs`.
      electionPrefix: `${lockPrefix}jobs/`,
    });
    try {
      const leadership = await nested.campaign('x', 'inner');
      const err = await leadership.put(`${lockPrefix}jobs/config`, 'v').then(
        () => undefined,
        (e: unknown) => e,
      );
      const viaTxn = await fencedTxn(nested, {
        resource: 'r',
        token: leadership.token,
        ops: [{ type: 'put', key: `${lockPrefix}jobs/other`, value: 'v' }],
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      await leadership.resign();
      // What happens instead: the lease-less keys sit first in the outer lock `jobs` for good.
      const holder = await client.holder('jobs');
      expect({
        holdWriteRefused: isInvalidArgumentError(err),
        fencedTxnRefused: isInvalidArgumentError(viaTxn),
        outerHolder: holder?.key,
      }).toEqual({ holdWriteRefused: true, fencedTxnRefused: true, outerHolder: undefined });
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
