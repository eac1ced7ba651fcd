import { describe, expect, it } from 'vitest';
import type { KvEvent } from './kv.js';
import { MemoryKv } from './kv.js';

const b = (s: string) => Buffer.from(s);
const header = (revision: bigint) => ({
  cluster_id: '1',
  member_id: '1',
  revision: revision.toString(),
  raft_term: '1',
});

function store(leases: bigint[] = []) {
  const writes: { revision: bigint; events: KvEvent[] }[] = [];
  const kv = new MemoryKv({
    header,
    leaseExists: (id) => leases.includes(id),
    onWrite: (revision, events) => writes.push({ revision, events }),
  });
  return { kv, writes };
}

const keys = (res: { kvs: { key: Buffer }[] }) => res.kvs.map((kv) => kv.key.toString());

describe('MemoryKv', () => {
  it('moves the revision once per write, keeps create revision and counts versions', () => {
    const { kv } = store();
    expect(kv.revision).toBe(1n);
    kv.put({ key: b('a'), value: b('1') });
    kv.put({ key: b('a'), value: b('2') });
    const [a] = kv.range({ key: b('a') }).kvs;
    expect(a).toMatchObject({ create_revision: '2', mod_revision: '3', version: '2' });
    expect(a!.value.toString()).toBe('2');
    kv.deleteRange({ key: b('a') });
    kv.put({ key: b('a'), value: b('3') });
    expect(kv.range({ key: b('a') }).kvs[0]).toMatchObject({ create_revision: '5', version: '1' });
    // A delete of nothing writes nothing.
    kv.deleteRange({ key: b('zzz') });
    expect(kv.revision).toBe(5n);
  });

  it('reads a past revision, and refuses a compacted or future one', () => {
    const { kv } = store();
    kv.put({ key: b('a'), value: b('old') });
    kv.put({ key: b('a'), value: b('new') });
    kv.put({ key: b('b'), value: b('x') });
    expect(kv.range({ key: b('a'), revision: '2' }).kvs[0]!.value.toString()).toBe('old');
    expect(keys(kv.range({ key: b('a'), range_end: b('c'), revision: '3' }))).toEqual(['a']);
    expect(() => kv.range({ key: b('a'), revision: '9' })).toThrow(/future revision/);
    kv.compact(3n);
    expect(kv.range({ key: b('a'), revision: '3' }).kvs[0]!.value.toString()).toBe('new');
    expect(() => kv.range({ key: b('a'), revision: '2' })).toThrow(/compacted/);
  });

  it('ranges by prefix with limit, count, more, keys only, count only and sort', () => {
    const { kv } = store();
    kv.txn({
      success: [
        { request_put: { key: b('p/c'), value: b('1') } },
        { request_put: { key: b('p/a'), value: b('2') } },
      ],
    });
    kv.put({ key: b('p/b'), value: b('3') });
    kv.put({ key: b('q'), value: b('4') });
    const all = { key: b('p/'), range_end: b('p0') };
    expect(keys(kv.range(all))).toEqual(['p/a', 'p/b', 'p/c']);
    const page = kv.range({ ...all, limit: 2 });
    expect([keys(page), page.more, page.count]).toEqual([['p/a', 'p/b'], true, '3']);
    expect(kv.range({ ...all, keys_only: true }).kvs[0]!.value.length).toBe(0);
    expect(kv.range({ ...all, count_only: true })).toMatchObject({ kvs: [], count: '3' });
    // Create order; keys created in one txn keep key order among themselves.
    const byCreate = kv.range({ ...all, sort_target: 'Create', sort_order: 'Descend' });
    expect(keys(byCreate)).toEqual(['p/b', 'p/a', 'p/c']);
    expect(keys(kv.range({ ...all, sort_target: 'Create', limit: 1 }))).toEqual(['p/a']);
    expect(keys(kv.range({ key: b('\0'), range_end: b('\0') }))).toEqual([
      'p/a',
      'p/b',
      'p/c',
      'q',
    ]);
  });

  it('runs the branch its compares pick, at one revision, reads seeing earlier writes', () => {
    const { kv, writes } = store();
    kv.put({ key: b('k'), value: b('v') });
    const res = kv.txn({
      compare: [{ key: b('k'), target: 'Create', result: 'Equal', create_revision: '2' }],
      success: [
        { request_put: { key: b('x'), value: b('1') } },
        { request_delete_range: { key: b('k'), prev_kv: true } },
        { request_range: { key: b('x') } },
      ],
      failure: [],
    });
    expect(res.succeeded).toBe(true);
    expect(res.header.revision).toBe('3');
    expect(res.responses[1]!.response_delete_range).toMatchObject({ deleted: '1' });
    expect(keys(res.responses[2]!.response_range)).toEqual(['x']);
    expect(writes.at(-1)!.events.map((e) => e.type)).toEqual(['Put', 'Delete']);
    const missing = kv.txn({
      compare: [{ key: b('k'), target: 'Version', result: 'Greater', version: '0' }],
      success: [{ request_put: { key: b('never'), value: b('') } }],
      failure: [{ request_range: { key: b('x') } }],
    });
    expect(missing.succeeded).toBe(false);
    expect(kv.revision).toBe(3n);
    // A missing key compares as zero, except by value.
    const byValue = kv.txn({
      compare: [{ key: b('k'), target: 'Value', result: 'NotEqual', value: b('v') }],
    });
    expect(byValue.succeeded).toBe(false);
  });

  it('refuses a txn that puts with an unknown lease and writes nothing of it', () => {
    const { kv } = store([7n]);
    kv.put({ key: b('a'), value: b(''), lease: '7' });
    expect(() =>
      kv.txn({
        success: [
          { request_put: { key: b('b'), value: b('') } },
          { request_put: { key: b('c'), value: b(''), lease: '8' } },
        ],
      }),
    ).toThrow(/requested lease not found/);
    expect(keys(kv.range({ key: b('\0'), range_end: b('\0') }))).toEqual(['a']);
    expect(kv.deleteLeased(7n)).toBe(1);
    expect(kv.range({ key: b('a') }).kvs).toEqual([]);
  });

  it('returns the previous value with prev_kv', () => {
    const { kv } = store();
    kv.put({ key: b('a'), value: b('1') });
    expect(kv.put({ key: b('a'), value: b('2'), prev_kv: true }).prev_kv?.value.toString()).toBe(
      '1',
    );
  });
});
