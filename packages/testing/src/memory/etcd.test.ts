import { describe, expect, it } from 'vitest';
import { memoryEtcd } from './etcd.js';

describe('MemoryEtcd', () => {
  it('writes, reads and deletes as another tool would, each write one revision', () => {
    const etcd = memoryEtcd();
    expect(etcd.revision).toBe(1n);
    expect(etcd.put('/a/1', 'x')).toBe(2n);
    etcd.put('/a/2', 'y');
    etcd.put('/b', 'z');
    expect(etcd.get('/a/1')).toEqual({
      key: '/a/1',
      value: 'x',
      createRevision: 2n,
      modRevision: 2n,
      version: 1n,
      leaseId: 0n,
    });
    expect(etcd.keys('/a/').map((k) => k.key)).toEqual(['/a/1', '/a/2']);
    expect(etcd.delete('/a/', { prefix: true })).toBe(2);
    expect(etcd.revision).toBe(5n);
    expect(etcd.keys().map((k) => k.key)).toEqual(['/b']);
    expect(etcd.delete('/nothing')).toBe(0);
  });

  it('refuses bad input at the call, naming the value and what is allowed', () => {
    expect(() => memoryEtcd({ startMs: -1 })).toThrow(
      'startMs must be a finite number of milliseconds, 0 or more, got -1',
    );
    const etcd = memoryEtcd();
    expect(() => etcd.put('/k', 'v', { leaseId: 42n })).toThrow(
      'options.leaseId must be a live lease of this etcd (see leases()), got 42n',
    );
    expect(() => etcd.compact(5 as never)).toThrow(
      'revision must be a bigint from 1 to the current revision 1, got 5',
    );
    expect(() => etcd.compact(2n)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => etcd.revokeLease(1 as never)).toThrow(/leaseId must be a bigint lease id, got 1/);
    expect(etcd.revokeLease(1n)).toBe(false);
  });

  it('starts its clock where told', async () => {
    const etcd = memoryEtcd({ startMs: 5_000 });
    await etcd.clock.advance(250);
    expect(etcd.clock.now()).toBe(5_250);
  });
});
