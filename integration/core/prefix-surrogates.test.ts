/**
 * Key prefixes with an unpaired UTF-16 surrogate. On the wire each lone half becomes U+FFFD, so
 * the keys etcd stores and sends back are not the strings the client compares them with: every
 * queue read (which keeps only keys whose queue is exactly `<prefix><name>/`) and the watch's
 * routing by queue would find none of the queue's own keys. Such prefixes are refused at the call,
 * as names are, before anything is written.
 */
import { connect, isInvalidArgumentError, type Leasehold } from '@leasehold/core';
import { isInvalidArgumentError as fenceIsInvalidArgumentError } from '@leasehold/fence';
import { etcdStore, fencedTxn } from '@leasehold/fence/etcd';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
const base = uniquePrefix('prefix-surrogates');

afterAll(async () => {
  await admin.delete().prefix(base);
  admin.close();
});

/** Connects, or the error connect threw. */
const tryConnect = (options: Parameters<typeof connect>[0]) =>
  connect(options).then(
    (client) => ({ client, error: undefined }),
    (error: unknown) => ({ client: undefined, error }),
  );

describe('connect: a lock or election prefix with a lone surrogate', () => {
  it('lockPrefix "…\\uD800/" is refused with InvalidArgumentError (accepted, two clients hold lock "x" at once)', async () => {
    const options = {
      endpoints,
      lockPrefix: `${base}locks\uD800/`,
      electionPrefix: `${base}elections-a/`,
      dialTimeoutMs: 5_000,
    };
    const a = await tryConnect(options);
    const b = await tryConnect(options);
    let bothHeld = false;
    if (a.client && b.client) {
      const first = await a.client.acquire('x', { timeoutMs: 5_000 });
      // Refused at once if `x` is seen held (the bug: b finds no key of its own queue).
      const second = await b.client.tryAcquire('x').catch(() => undefined);
      bothHeld = second !== undefined;
      await second?.release();
      await first.release();
    }
    await Promise.all([a.client?.close(), b.client?.close()]);
    expect({
      refused: isInvalidArgumentError(a.error),
      message: (a.error as Error | undefined)?.message,
      bothHeld,
    }).toEqual({
      refused: true,
      message: expect.stringMatching(
        /^lockPrefix must be .*without unpaired UTF-16 surrogates/,
      ) as unknown,
      bothHeld: false,
    });
  });

  it('electionPrefix "…\\uDC00/" is refused with InvalidArgumentError (accepted, two candidates lead "e" at once)', async () => {
    const options = {
      endpoints,
      lockPrefix: `${base}locks-b/`,
      electionPrefix: `${base}elections\uDC00/`,
      dialTimeoutMs: 5_000,
    };
    const a = await tryConnect(options);
    const b = await tryConnect(options);
    let bothLead = false;
    if (a.client && b.client) {
      const first = await a.client.campaign('e', 'a', { timeoutMs: 5_000 });
      const second = await b.client.campaign('e', 'b', { timeoutMs: 2_000 }).catch(() => undefined);
      bothLead = second !== undefined;
      await second?.resign();
      await first.resign();
    }
    await Promise.all([a.client?.close(), b.client?.close()]);
    expect({
      refused: isInvalidArgumentError(a.error),
      message: (a.error as Error | undefined)?.message,
      bothLead,
    }).toEqual({
      refused: true,
      message: expect.stringMatching(
        /^electionPrefix must be .*without unpaired UTF-16 surrogates/,
      ) as unknown,
      bothLead: false,
    });
  });
});

describe('@leasehold/fence/etcd: a fence prefix or resource with a lone surrogate', () => {
  let client: Leasehold;
  // U+FFFD is a well-formed character: the lock prefix is fine. A fence prefix spelled with a
  // lone surrogate where it stands is the same bytes on the wire, and its keys land in the queue.
  const lockPrefix = `${base}l\uFFFD/`;
  beforeAll(async () => {
    client = await connect({ endpoints, lockPrefix, electionPrefix: `${base}fence-elections/` });
  });
  afterAll(() => client.close());

  it('fencedTxn with prefix "…l\\uD800/" is refused before its fence key (no lease) lands in the queue of lock "token"', async () => {
    const err = await fencedTxn(client, {
      resource: 'r',
      token: 5n,
      prefix: `${base}l\uD800/`,
      ops: [{ type: 'put', key: `${base}data/x`, value: 'v' }],
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const inQueue = await admin.getAll().prefix(`${lockPrefix}token/`).keys();
    expect({ refused: fenceIsInvalidArgumentError(err), inQueue }).toEqual({
      refused: true,
      inQueue: [],
    });
  });

  it('etcdStore with prefix "…l\\uD800/" is refused at the call', () => {
    let err: unknown;
    try {
      etcdStore(client, { prefix: `${base}l\uD800/` });
    } catch (e) {
      err = e;
    }
    expect({
      refused: fenceIsInvalidArgumentError(err),
      message: (err as Error | undefined)?.message,
    }).toEqual({
      refused: true,
      message: expect.stringMatching(
        /^options\.prefix must be .*unpaired UTF-16 surrogates/,
      ) as unknown,
    });
  });

  it('fencedTxn with resource "r\\uD800" is refused with InvalidArgumentError naming the resource (not a URIError)', async () => {
    const err = await fencedTxn(client, {
      resource: 'r\uD800',
      token: 5n,
      ops: [{ type: 'put', key: `${base}data/y`, value: 'v' }],
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect({
      refused: fenceIsInvalidArgumentError(err),
      name: (err as Error | undefined)?.name,
      message: (err as Error | undefined)?.message,
    }).toEqual({
      refused: true,
      name: 'InvalidArgumentError',
      message: expect.stringMatching(/^resource must be .*got "r\\ud800"/) as unknown,
    });
  });
});
