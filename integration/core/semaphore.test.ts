/**
 * Semaphores and read/write locks in one process against the run's etcd: the limit and its
 * refusal, withdrawal on abort, timeout and loss (also while etcd is away), slots, the report,
 * and the key namespaces they share with plain locks.
 */
import {
  connect,
  defaults,
  isLockLostError,
  isLockTakenError,
  isLockTimeoutError,
  isPermitsMismatchError,
  type Leasehold,
  type Permit,
} from '@leasehold/core';
import { TcpFaultProxy } from '@leasehold/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { etcdClient, onCleanup, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());
const keys = (range: string) => admin.getAll().prefix(range).keys();

/** A promise's outcome, readable synchronously once it settled. */
function track<T>(promise: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  void promise.then(
    (value) => Object.assign(state, { settled: true, value }),
    (error: unknown) => Object.assign(state, { settled: true, error }),
  );
  return state;
}

async function client(lockPrefix: string, extra: Partial<Parameters<typeof connect>[0]> = {}) {
  return connect({ endpoints, lockPrefix, ...extra });
}

describe('semaphores', () => {
  it('the first holder sets the limit: other permits are refused at once, naming both, and leave no key; the right ones are never held up', async () => {
    const prefix = uniquePrefix('sem-limit');
    await using c = await client(prefix);
    const range = `${prefix}api%sem/`;
    const held = await c.acquirePermit('api', { permits: 3 });
    const refusals: unknown[] = [];
    // Wrong and right callers at once, many times: a wrong one never gets in, and never makes a
    // right one wait or fail.
    const right: Promise<Permit>[] = [];
    for (let i = 0; i < 20; i++) {
      refusals.push(await c.acquirePermit('api', { permits: 5 }).catch((e: unknown) => e));
      right.push(c.tryAcquirePermit('api', { permits: 3 }));
      if (right.length === 2) {
        for (const p of await Promise.all(right.splice(0))) await p.release();
      }
    }
    expect(refusals.every(isPermitsMismatchError)).toBe(true);
    const [first] = refusals as Error[] & { permits: number; heldPermits: number }[];
    expect(first).toMatchObject({ permits: 5, heldPermits: 3, semaphore: 'api' });
    expect(first!.message).toMatch(/in use with permits 3; this call asked for permits 5/);
    expect((await keys(range)).filter((k) => !k.includes('/3.'))).toEqual([]);
    await held.release();
    // Once nobody holds or waits, a new limit may start.
    await waitFor(async () => (await keys(range)).length === 0, { what: 'the queue empty' });
    await (await c.acquirePermit('api', { permits: 5 })).release();
  });

  it('a key written by hand into a semaphore’s queue that names no permits refuses joins, saying so', async () => {
    const prefix = uniquePrefix('sem-foreign');
    await using c = await client(prefix);
    // A key that starts like a permit key (with a digit) but names no permits.
    const lease = admin.lease(10);
    await lease.grant();
    await lease.put(`${prefix}f%sem/42`).value('by hand');
    try {
      const err = await c.acquirePermit('f', { permits: 2 }).catch((e: unknown) => e);
      expect(isPermitsMismatchError(err)).toBe(true);
      expect((err as Error).message).toMatch(
        /holds a key that names no permits .*asked for permits 2/,
      );
    } finally {
      await lease.revoke();
    }
  });

  it('one session holds several permits of one semaphore; slots are the lowest free; a freed slot goes to the next holder; the records go once idle', async () => {
    const prefix = uniquePrefix('sem-slots');
    await using c = await client(prefix);
    const opts = { permits: 3 };
    const [p0, p1, p2] = [
      await c.acquirePermit('s', opts),
      await c.acquirePermit('s', opts),
      await c.acquirePermit('s', opts),
    ];
    expect([p0, p1, p2].map((p) => p.slot)).toEqual([0, 1, 2]);
    const hex = p0.session.leaseId.toString(16);
    expect([p0, p1, p2].map((p) => p.key)).toEqual(
      [0, 1, 2].map((n) => `${prefix}s%sem/3.${hex}.${n}`),
    );
    const waiting = track(c.acquirePermit('s', opts));
    await waitFor(async () => (await keys(`${prefix}s%sem/`)).length === 4, { what: 'queued' });
    const state = await c.semaphore('s');
    expect(state.permits).toBe(3);
    expect(state.holders.map((h) => [h.slot, h.token])).toEqual(
      [p0, p1, p2].map((p) => [p.slot, p.token]),
    );
    expect(state.waiting).toHaveLength(1);
    await p1.release();
    const p3 = await waitFor(() => waiting.value, { what: 'the waiter admitted' });
    expect(p3.slot).toBe(1);
    expect(p3.slotResource).toBe('s#1');
    expect(p3.token).toBeGreaterThan(p1.token);
    // Slots 2 and 0 free: the next permit takes the lowest.
    await p2.release();
    await p0.release();
    const p4 = await c.acquirePermit('s', opts);
    expect(p4.slot).toBe(0);
    for (const p of [p3, p4]) await p.release();
    // The slot records go a second after the last release of an idle semaphore.
    await waitFor(async () => (await keys(`${prefix}s%slot/`)).length === 0, {
      what: 'slot records removed',
      timeoutMs: 5_000,
    });
    expect(await c.semaphore('s')).toEqual({ permits: undefined, holders: [], waiting: [] });
  });

  it('a slot last held by a newer permit is not taken by an older one that is late to claim: a slot’s tokens only grow', async () => {
    const prefix = uniquePrefix('sem-late-claim');
    // X reaches etcd through a proxy that delays everything: it learns late that it may hold
    // and claims late, after a newer permit came, took a slot and left.
    const DELAY_MS = 400;
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    await using h = await client(prefix);
    await using cx = await client(prefix, { endpoints: [proxy.url] });
    await using cn = await client(prefix);
    const opts = { permits: 2 };
    const held = [await h.acquirePermit('l', opts), await h.acquirePermit('l', opts)];
    expect(held.map((p) => p.slot)).toEqual([0, 1]);
    const x = track(cx.acquirePermit('l', opts));
    await waitFor(async () => (await keys(`${prefix}l%sem/`)).length === 3, { what: 'x queued' });
    const n = track(cn.acquirePermit('l', opts));
    await waitFor(async () => (await keys(`${prefix}l%sem/`)).length === 4, { what: 'n queued' });
    proxy.setMode('delay', { delayMs: DELAY_MS });
    // Slot 0's holder leaves first: x may hold now, and wants slot 0. Then slot 1's: n may hold
    // too, and takes slot 0 while x's claim is still on its way.
    for (const p of held) await p.release();
    const newer = await waitFor(() => n.value, { what: 'n admitted' });
    const late = !x.settled; // the case under test: x has not claimed yet
    await newer.release();
    const older = await waitFor(() => x.value, {
      what: 'x admitted',
      timeoutMs: 10 * DELAY_MS + 5_000,
    });
    console.log(
      `[sem late claim] n (token ${newer.token}) took slot ${newer.slot} and left ${late ? 'before' : 'after'} x (token ${older.token}) took slot ${older.slot}`,
    );
    expect(older.token).toBeLessThan(newer.token);
    expect(older.slot).not.toBe(newer.slot);
    proxy.setMode('pass');
    await older.release();
  });

  it('abort and timeout withdraw the waiter key; so does a waiter whose session is lost', async () => {
    const prefix = uniquePrefix('sem-withdraw');
    await using c = await client(prefix);
    const range = `${prefix}w%sem/`;
    const held = await c.acquirePermit('w', { permits: 1 });
    const controller = new AbortController();
    const aborted = c.acquirePermit('w', { permits: 1, signal: controller.signal });
    await waitFor(async () => (await keys(range)).length === 2, { what: 'the waiter queued' });
    controller.abort(new Error('stop'));
    await expect(aborted).rejects.toThrow('stop');
    await waitFor(async () => (await keys(range)).length === 1, {
      what: 'the aborted waiter gone',
    });
    const timedOut = await c
      .acquirePermit('w', { permits: 1, timeoutMs: 200 })
      .catch((e: unknown) => e);
    expect(isLockTimeoutError(timedOut)).toBe(true);
    expect((timedOut as Error).message).toBe(
      'a permit of semaphore "w" (1 permit) was not acquired within 200 ms (timeoutMs)',
    );
    await waitFor(async () => (await keys(range)).length === 1, {
      what: 'the timed-out waiter gone',
    });
    const session = await c.session({ ttlSeconds: 5 });
    const lost = c.acquirePermit('w', { permits: 1, session });
    await waitFor(async () => (await keys(range)).length === 2, { what: 'the waiter queued' });
    const rejected = expect(lost).rejects.toMatchObject({ name: 'LockLostError' });
    await admin.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    await rejected;
    expect(await keys(range)).toEqual([held.key]);
    const taken = await c.tryAcquirePermit('w', { permits: 1 }).catch((e: unknown) => e);
    expect(isLockTakenError(taken)).toBe(true);
    expect((taken as Error).message).toContain(`all 1 permits of semaphore "w" are taken`);
    await waitFor(async () => (await keys(range)).length === 1, { what: 'the try withdrawn' });
    await held.release();
  });

  it("an abort while etcd is away withdraws the waiter's key once it is back", async () => {
    const prefix = uniquePrefix('sem-away');
    await using proxy = await TcpFaultProxy.start({ target: endpoints[0]! });
    await using holder = await client(prefix);
    await using c = await client(prefix, { endpoints: [proxy.url], callTimeoutMs: 1_000 });
    const errors: string[] = [];
    onCleanup(c, (e) => errors.push(e.message));
    const range = `${prefix}away%sem/`;
    const held = await holder.acquirePermit('away', { permits: 1 });
    const controller = new AbortController();
    const waiting = c.acquirePermit('away', { permits: 1, signal: controller.signal });
    await waitFor(async () => (await keys(range)).length === 2, { what: 'the waiter queued' });
    proxy.setMode('stall');
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
    await waitFor(() => errors.some((m) => m.includes('withdraw')), {
      what: 'the first withdraw attempt failing',
    });
    expect((await keys(range)).length).toBe(2);
    proxy.setMode('pass');
    await waitFor(async () => (await keys(range)).length === 1, {
      what: 'the withdraw retried once etcd answers',
    });
    await held.release();
  });

  it('etcdctl del --prefix: holders and waiters see the loss; the semaphore works again afterwards', async () => {
    const prefix = uniquePrefix('sem-del');
    await using c = await client(prefix);
    const opts = { permits: 2 };
    const holders = [await c.acquirePermit('d', opts), await c.acquirePermit('d', opts)];
    const waiting = track(c.acquirePermit('d', opts));
    await waitFor(async () => (await keys(`${prefix}d%sem/`)).length === 3, { what: 'queued' });
    await admin.delete().prefix(prefix);
    for (const h of holders) {
      await waitFor(() => !h.isHeld, { what: `${h.key} lost` });
      expect(isLockLostError(h.signal.reason)).toBe(true);
    }
    await waitFor(() => waiting.settled, { what: 'the waiter ended' });
    expect(isLockLostError(waiting.error)).toBe(true);
    const again = [await c.acquirePermit('d', opts), await c.acquirePermit('d', opts)];
    expect(again.map((p) => p.slot).sort()).toEqual([0, 1]);
    for (const p of again) await p.release();
  });

  it("a permit or read key of this client's lease that no hold owns (a join that landed late) is swept", async () => {
    const prefix = uniquePrefix('sem-sweep');
    await using c = await client(prefix);
    const held = await c.acquirePermit('live', { permits: 1 }); // the watch is up
    const hex = held.session.leaseId.toString(16);
    const orphans = [`${prefix}o%sem/2.${hex}.7`, `${prefix}o%rw/r.${hex}.3`];
    for (const key of orphans) {
      await admin.kv.put({
        key: Buffer.from(key),
        value: Buffer.from(''),
        lease: held.session.leaseId.toString(),
      });
    }
    // From the put's watch event at once; at the latest from the next read of the prefix.
    await waitFor(async () => (await keys(`${prefix}o%`)).length === 0, {
      what: 'orphaned keys swept',
      timeoutMs: defaults.recheckIntervalMs + defaults.callTimeoutMs,
    });
    expect(held.isHeld).toBe(true);
    await held.release();
  });

  it('a client that closes right after its last release removes the slot records as it closes', async () => {
    const prefix = uniquePrefix('sem-close');
    const c = await client(prefix);
    await (await c.acquirePermit('c', { permits: 2 })).release();
    expect(await keys(`${prefix}c%slot/`)).toHaveLength(1); // removed a second later, or on close
    await c.close();
    expect(await keys(prefix)).toEqual([]);
  });

  it('withPermit runs fn with the token and slot and releases; its own outcome wins', async () => {
    const prefix = uniquePrefix('sem-with');
    await using c = await client(prefix);
    const seen = await c.withPermit('x', { permits: 2 }, ({ token, slot, signal, permit }) => {
      expect(signal.aborted).toBe(false);
      return { token, slot, key: permit.key };
    });
    expect(seen.slot).toBe(0);
    await expect(
      c.withPermit('x', { permits: 2 }, () => {
        throw new Error('fn failed');
      }),
    ).rejects.toThrow('fn failed');
    await waitFor(async () => (await keys(`${prefix}x%sem/`)).length === 0, { what: 'released' });
  });
});

describe('read/write locks', () => {
  it('readers share, a writer waits for them and excludes everyone, a reader after a waiting writer waits', async () => {
    const prefix = uniquePrefix('rw-basic');
    await using c = await client(prefix);
    const r1 = await c.acquireRead('db');
    const r2 = await c.acquireRead('db');
    expect(r2.key).toMatch(/%rw\/r\.[0-9a-f]+\.1$/);
    const w = track(c.acquireWrite('db'));
    await waitFor(async () => (await keys(`${prefix}db%rw/`)).length === 3, {
      what: 'writer queued',
    });
    const tryRead = await c.tryAcquireRead('db').catch((e: unknown) => e);
    expect(isLockTakenError(tryRead)).toBe(true);
    const readTimedOut = await c.acquireRead('db', { timeoutMs: 200 }).catch((e: unknown) => e);
    expect((readTimedOut as Error).message).toBe(
      'read/write lock "db" (for reading) was not acquired within 200 ms (timeoutMs)',
    );
    const r3 = track(c.acquireRead('db'));
    await r1.release();
    await r2.release();
    const writer = await waitFor(() => w.value, { what: 'the writer in' });
    expect(writer.token).toBeGreaterThan(r2.token);
    expect(isLockTakenError(await c.tryAcquireWrite('db').catch((e: unknown) => e))).toBe(true);
    expect(r3.settled).toBe(false);
    await writer.release();
    const reader = await waitFor(() => r3.value, { what: 'the later reader in' });
    await reader.release();
    expect(await c.withWrite('db', ({ token }) => token)).toBeGreaterThan(reader.token);
    expect(await c.withRead('db', ({ lock }) => lock.key)).toMatch(/%rw\/r\./);
  });
});

describe('key namespaces', () => {
  it('the lock, the semaphore and the read/write lock of one name never meet; nor do names with % or /', async () => {
    const prefix = uniquePrefix('ns');
    await using c: Leasehold = await client(prefix);
    const holds = [
      await c.acquire('x'),
      await c.tryAcquirePermit('x', { permits: 1 }),
      await c.tryAcquireWrite('x'),
      await c.tryAcquire('x%sem'),
      await c.tryAcquirePermit('x/y', { permits: 1 }),
      await c.tryAcquireWrite('x%rw'),
    ];
    expect(holds.map((h) => h.key.slice(prefix.length, h.key.lastIndexOf('/')))).toEqual([
      'x',
      'x%sem',
      'x%rw',
      'x%25sem',
      'x%2Fy%sem',
      'x%25rw%rw',
    ]);
    expect(await c.holder('x')).toMatchObject({ key: holds[0]!.key });
    for (const h of holds) await h.release();
  });
});
