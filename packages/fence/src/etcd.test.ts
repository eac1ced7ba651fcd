import type { Leasehold } from '@leasehold/core';
import { describe, expect, it } from 'vitest';
import { isInvalidArgumentError, isInvalidTokenError } from './errors.js';
import { etcdStore, fencedTxn, padToken } from './etcd.js';

// Validation happens before the client is touched, so a stand-in client is enough here; the
// transaction itself is tested against etcd in integration/fence/etcd.test.ts.
const client = { lockPrefix: '/L/', electionPrefix: '/E/' } as Leasehold;

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err,
  );
}

describe('etcd fence', () => {
  it('pads tokens to 20 digits so byte order is numeric order', () => {
    expect(padToken(99n) < padToken(100n)).toBe(true);
    expect(padToken(9223372036854775807n)).toBe('09223372036854775807');
  });

  it('keeps fence and value keys under the prefix, resource names encoded', () => {
    const store = etcdStore(client, { prefix: '/app/' });
    expect(store.fenceKey('jobs/a b')).toBe('/app/token/jobs%2Fa%20b');
    expect(store.valueKey('jobs')).toBe('/app/value/jobs');
    expect(etcdStore(client).prefix).toBe('/leasehold/fence/');
  });

  it.each<[string, object, RegExp]>([
    [
      'a NUL in the prefix',
      { prefix: 'a\0b' },
      /^options.prefix must be a string without NUL or unpaired UTF-16 surrogates, got "a\\u0000b"$/,
    ],
    [
      'a prefix of another type',
      { prefix: 7 },
      /^options.prefix must be a string without NUL or unpaired UTF-16 surrogates, got 7$/,
    ],
    [
      'a zero timeout',
      { timeoutMs: 0 },
      /^options.timeoutMs must be a positive integer number of milliseconds, got 0$/,
    ],
  ])('refuses %s', (_label, options, message) => {
    expect(() => etcdStore(client, options)).toThrow(message);
  });

  it('validates the token, the resource and the ops before calling etcd', async () => {
    const txn = { resource: 'r', token: 1n, ops: [{ type: 'put' as const, key: 'k', value: 'v' }] };
    expect(isInvalidTokenError(await rejection(fencedTxn(client, { ...txn, token: 0n })))).toBe(
      true,
    );
    expect(
      isInvalidArgumentError(await rejection(fencedTxn(client, { ...txn, resource: '' }))),
    ).toBe(true);
    const noOps = await rejection(fencedTxn(client, { ...txn, ops: [] }));
    expect((noOps as Error).message).toMatch(/^ops must be a non-empty array/);
    const badOp = await rejection(
      fencedTxn(client, { ...txn, ops: [{ type: 'put', key: 'k' } as never] }),
    );
    expect((badOp as Error).message).toMatch(/^ops\[0\]\.value must be a string or Uint8Array/);
  });

  it.each<[string, string, RegExp]>([
    ['a key inside a lock queue', '/L/jobs/1', /outside the lock and election queues/],
    ['a key inside an election queue', '/E/vote/abc', /outside the lock and election queues/],
    ['the fence key itself', '/leasehold/fence/token/r', /it is the fence key of resource "r"/],
  ])('refuses %s, as a hold’s fenced write does', async (_label, key, message) => {
    const err = await rejection(
      fencedTxn(client, { resource: 'r', token: 1n, ops: [{ type: 'put', key, value: 'v' }] }),
    );
    expect(isInvalidArgumentError(err)).toBe(true);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).toContain(JSON.stringify(key));
  });

  it('refuses a key named twice', async () => {
    const err = await rejection(
      fencedTxn(client, {
        resource: 'r',
        token: 1n,
        ops: [
          { type: 'put', key: 'k', value: 'v' },
          { type: 'delete', key: 'k' },
        ],
      }),
    );
    expect((err as Error).message).toMatch(/^ops\[1\]\.key must be a key no other op/);
  });

  it('keys directly under a lock or election prefix are in no queue: allowed', async () => {
    // The stand-in client has no etcd: getting past validation is what fails.
    const err = await rejection(
      fencedTxn(client, { resource: 'r', token: 1n, ops: [{ type: 'delete', key: '/L/data' }] }),
    );
    expect(isInvalidArgumentError(err)).toBe(false);
  });

  it('a lone surrogate in a key is refused (two such keys are the same bytes on the wire)', async () => {
    const err = await rejection(
      fencedTxn(client, { resource: 'r', token: 1n, ops: [{ type: 'delete', key: 'x\uD800' }] }),
    );
    expect((err as Error).message).toMatch(/^ops\[0\]\.key must be a string without unpaired/);
  });

  it('a prefix option whose fence or value keys would fall under a lock or election prefix is refused', () => {
    for (const prefix of ['/L/', '/L/jobs/', '/E/x']) {
      expect(() => etcdStore(client, { prefix })).toThrow(
        /^options.prefix must be a prefix outside .* it overlaps .*, got /,
      );
    }
    expect(() => etcdStore(client, { prefix: '/' })).not.toThrow();
  });
});
