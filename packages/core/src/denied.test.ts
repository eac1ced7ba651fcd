import { describe, expect, it } from 'vitest';
import { describeRange, describeRanges, permissionDenied, rangesOfTxn } from './denied.js';
import { isEtcdRequestError, isPermissionDeniedError } from './errors.js';
import { prefixEnd } from './etcd.js';

describe('describeRange', () => {
  it('names a key, a prefix and a plain range', () => {
    expect(describeRange({ key: Buffer.from('/a/b') })).toBe('key "/a/b"');
    const p = '/leasehold/lock/';
    expect(describeRange({ key: Buffer.from(p), range_end: prefixEnd(p) })).toBe(
      'prefix "/leasehold/lock/"',
    );
    expect(describeRange({ key: Buffer.from('a'), range_end: Buffer.from('c') })).toBe(
      'range ["a", "c")',
    );
    expect(describeRange({ key: Buffer.from('a'), range_end: Buffer.from([0]) })).toBe(
      'range ["a", end of keyspace)',
    );
  });

  it('recognises the prefix end of keys ending in 0xff bytes', () => {
    const key = Buffer.from([0x61, 0xff, 0xff]);
    expect(describeRange({ key, range_end: Buffer.from([0x62]) })).toMatch(/^prefix/);
    expect(describeRange({ key, range_end: Buffer.from([0x63]) })).toMatch(/^range/);
  });
});

describe('describeRanges and rangesOfTxn', () => {
  it('lists every distinct range a txn compares, reads or writes', () => {
    const key = Buffer.from('/l/a/1');
    const ranges = rangesOfTxn({
      compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
      success: [{ request_put: { key, value: Buffer.from('v') } }],
      failure: [{ request_range: { key: Buffer.from('/l/a/'), range_end: prefixEnd('/l/a/') } }],
    });
    expect(describeRanges(ranges)).toBe('key "/l/a/1", prefix "/l/a/"');
    expect(describeRanges([])).toBe('no keys');
  });
});

describe('permissionDenied', () => {
  it('is a typed refusal naming the keys and the fix', () => {
    const cause = new Error('7 PERMISSION_DENIED: etcdserver: permission denied');
    const err = permissionDenied('lock first', 'http://a:1', 'prefix "/x/"', cause);
    expect(isPermissionDeniedError(err)).toBe(true);
    expect(isEtcdRequestError(err)).toBe(true);
    expect(err).toMatchObject({ name: 'PermissionDeniedError', code: 'PERMISSION_DENIED' });
    expect(err.keys).toBe('prefix "/x/"');
    expect(err.cause).toBe(cause);
    expect(err.message).toMatch(/lock first on prefix "\/x\/".*grant-permission/);
  });
});
