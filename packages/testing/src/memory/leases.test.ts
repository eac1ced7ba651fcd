import { describe, expect, it } from 'vitest';
import { MemoryClock } from './clock.js';
import { MemoryKv } from './kv.js';
import { MemoryLeases } from './leases.js';

function world() {
  const clock = new MemoryClock();
  const deletes: bigint[] = [];
  const leases: MemoryLeases = new MemoryLeases(clock, () => kv);
  const kv = new MemoryKv({
    header: (revision) => ({
      cluster_id: '1',
      member_id: '1',
      revision: String(revision),
      raft_term: '1',
    }),
    leaseExists: (id) => leases.has(id),
    onWrite: (revision, events) => {
      if (events.every((e) => e.type === 'Delete')) deletes.push(revision);
    },
  });
  return { clock, leases, kv, deletes };
}

describe('MemoryLeases', () => {
  it('expires a lease after its TTL on the clock, deleting its keys at one revision', async () => {
    const { clock, leases, kv, deletes } = world();
    const { id } = leases.grant(5);
    kv.put({ key: Buffer.from('a'), value: Buffer.from(''), lease: id.toString() });
    kv.put({ key: Buffer.from('b'), value: Buffer.from(''), lease: id.toString() });
    kv.put({ key: Buffer.from('c'), value: Buffer.from('') });
    await clock.advance(4_999);
    expect(leases.has(id)).toBe(true);
    await clock.advance(1);
    expect(leases.has(id)).toBe(false);
    expect(deletes).toEqual([5n]);
    expect(kv.range({ key: Buffer.from('\0'), range_end: Buffer.from('\0') }).count).toBe('1');
  });

  it('keepalive renews for a whole TTL; time-to-live rounds down; gone is -1', async () => {
    const { clock, leases } = world();
    const { id } = leases.grant(3);
    await clock.advance(2_500);
    expect(leases.timeToLive(id)).toEqual({ ttlSeconds: 0, grantedSeconds: 3 });
    expect(leases.keepAlive(id)).toBe(3);
    await clock.advance(2_999);
    expect(leases.has(id)).toBe(true);
    await clock.advance(1);
    expect(leases.keepAlive(id)).toBe(0);
    expect(leases.timeToLive(id)).toEqual({ ttlSeconds: -1, grantedSeconds: 0 });
  });

  it("grants at least etcd's minimum TTL; revoke of an unknown lease is refused", () => {
    const { leases } = world();
    expect(leases.grant(1).ttlSeconds).toBe(2);
    expect(() => leases.revoke(1n)).toThrow(/requested lease not found/);
    const { id } = leases.grant(10);
    expect(() => leases.grant(10, id)).toThrow(/lease already exists/);
  });
});
