import { grantLease, kvCall } from '@leasehold/core/internal';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { memoryClient } from './client.js';
import { memoryEtcd } from './etcd.js';

/** Lets `promise` settle while the memory clock moves in small steps, up to `budgetMs`. */
async function settleWithin<T>(
  etcd: ReturnType<typeof memoryEtcd>,
  promise: Promise<T>,
  budgetMs: number,
) {
  let done = false;
  const result = promise.then(
    (value): { value?: T; error?: unknown } => ({ value }),
    (error: unknown): { value?: T; error?: unknown } => ({ error }),
  );
  void result.then(() => (done = true));
  for (let ms = 0; !done && ms <= budgetMs; ms += 10) await etcd.clock.advance(10);
  if (!done) throw new Error(`not settled within ${budgetMs} ms of memory time`);
  return result;
}

describe('memoryClient', () => {
  it('refuses options a memory client has no use for, and unknown ones, naming them', async () => {
    await expect(memoryClient({ endpoints: 'http://x:2379' } as never)).rejects.toThrow(
      /options\.endpoints must be left out: a memory client talks to its etcd option/,
    );
    // Only the type of what was given: it may be key material.
    const tls = memoryClient({ tls: '-----BEGIN PRIVATE KEY-----SECRET' } as never);
    await expect(tls).rejects.toThrow(/^options\.tls must be left out: .*, got string$/);
    await expect(memoryClient({ clock: {} } as never)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(memoryClient({ lockPrefx: '/x/' } as never)).rejects.toThrow(
      /options\.lockPrefx must be left out \(not an option; allowed: etcd, /,
    );
    await expect(memoryClient({ etcd: {} as never })).rejects.toThrow(
      /options\.etcd must be a MemoryEtcd from memoryEtcd\(\), got object/,
    );
    // connect()'s own checks apply.
    await expect(memoryClient({ lockPrefix: '' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('a lock and its session survive a long advance: keepalives run on the clock', async () => {
    const etcd = memoryEtcd();
    const client = await memoryClient({ etcd });
    const lock = await client.acquire('job');
    await etcd.clock.advance(10 * 60_000);
    expect(lock.isHeld).toBe(true);
    expect(etcd.get(lock.key)?.createRevision).toBe(lock.token);
    await client.close();
    // Closing revoked the shared session's lease: its key went with it.
    expect(etcd.leases()).toEqual([]);
    expect(etcd.get(lock.key)).toBeUndefined();
  });

  it('revokeLease ends a session: its lock is lost', async () => {
    const etcd = memoryEtcd();
    const client = await memoryClient({ etcd });
    const session = await client.session({ ttlSeconds: 5 });
    const lock = await client.acquire('job', { session });
    const lost = new Promise((resolve) => lock.onLost(resolve));
    expect(etcd.revokeLease(session.leaseId)).toBe(true);
    expect(etcd.revokeLease(session.leaseId)).toBe(false);
    const { value } = await settleWithin(etcd, lost, 5_000);
    expect(value).toMatchObject({ code: 'LOCK_LOST' });
    await client.close();
  });

  it('a paused holder keeps believing it holds until it resumes; then the loss fires', async () => {
    const etcd = memoryEtcd();
    const [a, b] = [await memoryClient({ etcd }), await memoryClient({ etcd })];
    const session = await a.session({ ttlSeconds: 3 });
    const lock = await a.acquire('job', { session });
    etcd.pause(a);
    const next = b.acquire('job');
    await etcd.clock.advance(3_000);
    const taken = await next;
    expect(taken.token).toBeGreaterThan(lock.token);
    let lost: unknown;
    lock.onLost((error) => (lost = error));
    expect(lost).toBeUndefined(); // nothing ran in the paused process
    etcd.resume(a);
    expect(lost).toMatchObject({ code: 'LOCK_LOST', token: lock.token });
    const stranger = await memoryClient();
    expect(() => etcd.pause(stranger)).toThrow(/client must be a client made by/);
    await stranger.close();
    await Promise.all([a.close(), b.close()]);
  });

  it('failNext: a read is retried and answers; hangNext: a fenced write ends at its deadline', async () => {
    const etcd = memoryEtcd();
    const client = await memoryClient({ etcd, callTimeoutMs: 2_000 });
    const lock = await client.acquire('job');
    etcd.faults.failNext({ only: 'kv' });
    // The retry's back-off is cockatiel's, on real timers: it needs no advance.
    expect(await client.holder('job')).toMatchObject({ token: lock.token });
    etcd.faults.hangNext({ only: 'kv', applied: true });
    const write = await settleWithin(etcd, lock.put('/data/x', 'v'), 5_000);
    expect(write.error).toMatchObject({ code: 'ETCD_UNAVAILABLE' });
    expect((write.error as Error).message).toMatch(
      /no answer from memory:\/\/etcd-\d+ within 2000 ms/,
    );
    // Applied, though never answered: what a timed-out write against etcd may do.
    expect(etcd.get('/data/x')?.value).toBe('v');
    expect(() => etcd.faults.failNext({ count: 0 })).toThrow(/count must be a whole number/);
    expect(() => etcd.faults.failNext({ only: 'watch' as never })).toThrow(/one of any, kv, lease/);
    await client.close();
  });

  it("serves core's internal entry as cron uses it: kvCall and a lease that expires by itself", async () => {
    const etcd = memoryEtcd();
    const client = await memoryClient({ etcd });
    const lease = await grantLease(client, 'retention lease grant', 5);
    await kvCall(
      client,
      'record',
      (kv, o) =>
        kv.put(
          { key: Buffer.from('/cron/r'), value: Buffer.from('1'), lease: lease.leaseId.toString() },
          o,
        ),
      { idempotent: false },
    );
    expect(etcd.get('/cron/r')?.leaseId).toBe(lease.leaseId);
    await etcd.clock.advance(5_000);
    expect(etcd.get('/cron/r')).toBeUndefined();
    await client.close();
  });

  it('compaction: an observer re-reads and carries on', async () => {
    const etcd = memoryEtcd();
    const [a, b] = [await memoryClient({ etcd }), await memoryClient({ etcd })];
    const stop = new AbortController();
    const states = b.observe('svc', { signal: stop.signal });
    expect((await states.next()).value).toMatchObject({ leader: undefined });
    const lead = await a.campaign('svc', 'a');
    etcd.compact();
    const seen = await settleWithin(etcd, states.next(), 1_000);
    expect(seen).toMatchObject({ value: { value: { leader: { value: 'a', token: lead.token } } } });
    stop.abort();
    await Promise.all([a.close(), b.close()]);
  });

  it("the README's example is readme-example.test.ts, byte for byte", () => {
    const read = (path: string) => readFileSync(new URL(path, import.meta.url), 'utf8');
    const blocks = [...read('../../README.md').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
    expect(blocks).toContain(read('./readme-example.test.ts'));
  });
});
