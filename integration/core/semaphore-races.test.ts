/**
 * Semaphores under races and server faults, checked against etcd's own view: a waiter's abort
 * racing its grant, a waiter cut off while the permits it waited for changed hands and the
 * history was compacted, an etcd restart under waiters, and a lease revoked or a key deleted
 * under a holder.
 */
import { connect, defaults, isLockLostError, type Permit } from '@leasehold/core';
import { startEtcd, TcpFaultProxy } from '@leasehold/testing';
import type { Etcd3 } from 'etcd3';
import { afterAll, describe, expect, it } from 'vitest';
import { monitorLoopLag } from '../setup/lag.js';
import { etcdClient, onCleanup, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const shared = etcdClient(endpoints);
afterAll(() => shared.close());

/** A promise's outcome, readable synchronously once it settled. */
function track<T>(promise: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  void promise.then(
    (value) => Object.assign(state, { settled: true, value }),
    (error: unknown) => Object.assign(state, { settled: true, error }),
  );
  return state;
}

/**
 * etcd's view of the semaphore `name` under `prefix`: the live permit keys oldest first (the
 * first `permits` hold), and which of them own a slot record.
 */
async function etcdView(admin: Etcd3, prefix: string, name: string, permits: number) {
  const queue = (await admin.getAll().prefix(`${prefix}${name}%sem/`).exec()).kvs
    .filter((kv) => kv.lease !== '0')
    .sort((a, b) => Number(BigInt(a.create_revision) - BigInt(b.create_revision)));
  const records = (await admin.getAll().prefix(`${prefix}${name}%slot/`).exec()).kvs.map((kv) => ({
    slot: Number(kv.key.toString().slice(`${prefix}${name}%slot/`.length)),
    ...(JSON.parse(kv.value.toString()) as { key: string; token: string }),
  }));
  const keys = queue.map((kv) => kv.key.toString());
  const holders = queue.slice(0, permits).map((kv) => ({
    key: kv.key.toString(),
    token: BigInt(kv.create_revision),
    slot: records.find(
      (r) => r.key === kv.key.toString() && BigInt(r.token) === BigInt(kv.create_revision),
    )?.slot,
  }));
  return { keys, holders };
}

/**
 * Every permit the SDK believes held is one of etcd's holders, with the slot etcd records for
 * it; no two share a slot.
 */
async function expectBeliefsMatchEtcd(
  admin: Etcd3,
  prefix: string,
  name: string,
  permits: number,
  believed: Permit[],
) {
  const view = await etcdView(admin, prefix, name, permits);
  const held = believed.filter((p) => p.isHeld);
  for (const p of held) {
    expect(view.holders, `${p.key} is held`).toContainEqual({
      key: p.key,
      token: p.token,
      slot: p.slot,
    });
  }
  expect(new Set(held.map((p) => p.slot)).size).toBe(held.length);
  expect(held.length).toBeLessThanOrEqual(permits);
  return view;
}

describe('a waiter whose abort races its grant', () => {
  it('never wedges a permit: whichever wins, the key goes and every permit can be taken again', async () => {
    const prefix = uniquePrefix('sem-abort-race');
    using lag = monitorLoopLag();
    await using holders = await connect({ endpoints, lockPrefix: prefix });
    await using waiters = await connect({ endpoints, lockPrefix: prefix });
    const opts = { permits: 2 };
    const range = `${prefix}r%sem/`;
    const kept = await holders.acquirePermit('r', opts);
    let cycling = await holders.acquirePermit('r', opts);
    // Where the abort lands relative to the release that admits the waiter.
    const when: ((release: Promise<void>) => Promise<void>)[] = [
      async () => undefined, // with the release
      async (release) => void (await release), // its answer
      async (release) => {
        await release;
        await new Promise((resolve) => setImmediate(resolve)); // the watch event, about
      },
      async (release) => {
        await release;
        await new Promise((resolve) => setTimeout(resolve, 1)); // the claim in flight, about
      },
    ];
    const outcomes = { granted: 0, aborted: 0 };
    for (let i = 0; i < 40; i++) {
      const controller = new AbortController();
      const waiting = waiters.acquirePermit('r', { ...opts, signal: controller.signal });
      const waiter = track(waiting);
      await waitFor(async () => (await shared.getAll().prefix(range).keys()).length === 3, {
        what: `waiter ${i} queued`,
      });
      const release = cycling.release();
      await when[i % when.length]!(release);
      controller.abort(new Error('stop'));
      await release;
      await waitFor(() => waiter.settled, {
        what: `waiter ${i} settled`,
        timeoutMs: defaults.callTimeoutMs + lag.maxLagMs,
      });
      if (waiter.value) {
        outcomes.granted++;
        await expectBeliefsMatchEtcd(shared, prefix, 'r', 2, [kept, waiter.value]);
        await waiter.value.release();
      } else {
        outcomes.aborted++;
        expect((waiter.error as Error).message).toBe('stop');
      }
      // Nothing of the waiter is left in etcd: only the kept permit's key.
      await waitFor(async () => (await shared.getAll().prefix(range).keys()).join() === kept.key, {
        what: `waiter ${i}'s key gone`,
        timeoutMs: defaults.callTimeoutMs + lag.maxLagMs,
      });
      // The freed permit is free: taken at once, by the other client.
      cycling = await holders.tryAcquirePermit('r', opts);
      expect(cycling.slot).not.toBe(kept.slot);
    }
    console.log(
      `[sem abort race] 40 aborts racing a grant: ${outcomes.granted} granted, ${outcomes.aborted} aborted`,
    );
    await cycling.release();
    await kept.release();
  }, 120_000);
});

describe('a holder under a revoked lease or a deleted key', () => {
  it('loses at once (signal, onLost, fenced writes refused); its slot goes to the next waiter with a larger token', async () => {
    const prefix = uniquePrefix('sem-revoke');
    using lag = monitorLoopLag();
    await using c = await connect({ endpoints, lockPrefix: prefix });
    const opts = { permits: 2 };
    const session = await c.session({ ttlSeconds: 30 });
    const revoked = await c.acquirePermit('v', { ...opts, session });
    const deleted = await c.acquirePermit('v', opts);
    const lost: unknown[] = [];
    revoked.onLost((e) => lost.push(e));
    deleted.onLost((e) => lost.push(e));
    const next = [track(c.acquirePermit('v', opts)), track(c.acquirePermit('v', opts))];
    await waitFor(
      async () => (await shared.getAll().prefix(`${prefix}v%sem/`).keys()).length === 4,
      {
        what: 'two waiters queued',
      },
    );
    await shared.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    await shared.delete().key(deleted.key);
    // One event each on the client's watch.
    await waitFor(() => lost.length === 2, {
      what: 'both losses reported',
      timeoutMs: defaults.callTimeoutMs + lag.maxLagMs,
    });
    for (const p of [revoked, deleted]) {
      expect(p.isHeld).toBe(false);
      expect(isLockLostError(p.signal.reason)).toBe(true);
      await expect(p.put(`${prefix}data`, 'late')).rejects.toMatchObject({ name: 'LockLostError' });
    }
    const admitted = await Promise.all(
      next.map((n) => waitFor(() => n.value, { what: 'a waiter admitted' })),
    );
    expect(admitted.map((p) => p.slot).sort()).toEqual([revoked.slot, deleted.slot].sort());
    for (const p of admitted) {
      const before = [revoked, deleted].find((q) => q.slot === p.slot)!;
      expect(p.token).toBeGreaterThan(before.token);
    }
    await expectBeliefsMatchEtcd(shared, prefix, 'v', 2, [revoked, deleted, ...admitted]);
    expect(await shared.get(`${prefix}data`).string()).toBeNull();
    for (const p of admitted) await p.release();
  });
});

describe('semaphores and server faults', () => {
  it('a waiter cut off while the permits changed hands and the history was compacted, then an etcd restart under waiters: never more holders than permits, slots unique, tokens per slot grow', async () => {
    await using etcd = await startEtcd({ provider: 'local', members: 1 });
    await using proxy = await TcpFaultProxy.start({ target: etcd.endpoints[0]! });
    let admin = etcdClient(etcd.endpoints);
    const prefix = uniquePrefix('sem-compact');
    const opts = { permits: 2 };
    // The sessions outlast the cut and the restart: etcd gives leases a fresh TTL on restart.
    const ttlSeconds = 60;
    await using actor = await connect({ endpoints: etcd.endpoints, lockPrefix: prefix });
    await using cut = await connect({
      endpoints: [proxy.url],
      lockPrefix: prefix,
      callTimeoutMs: 1_000,
    });
    onCleanup(actor, () => {});
    onCleanup(cut, () => {});
    try {
      const actorSession = await actor.session({ ttlSeconds });
      const cutSession = await cut.session({ ttlSeconds });
      const as = { ...opts, session: actorSession };
      const believed: Permit[] = [];
      const keep = (p: Permit) => (believed.push(p), p);
      const p0 = keep(await actor.acquirePermit('s', as));
      const p1 = keep(await actor.acquirePermit('s', as));
      const w1 = track(cut.acquirePermit('s', { ...opts, session: cutSession }));
      await waitFor(async () => (await etcdView(admin, prefix, 's', 2)).keys.length === 3, {
        what: 'w1 queued',
      });
      const a2 = track(actor.acquirePermit('s', as));
      await waitFor(async () => (await etcdView(admin, prefix, 's', 2)).keys.length === 4, {
        what: 'a2 queued',
      });

      // Cut off: p0 leaves (w1 holds by etcd's view, unclaimed), p1 leaves (a2 holds and claims
      // slot 0), a2 leaves and a3 takes slot 0 again. Then everything w1 missed is compacted.
      proxy.setMode('reset');
      await p0.release();
      await p1.release();
      const a2p = keep(await waitFor(() => a2.value, { what: 'a2 admitted' }));
      expect(a2p.slot).toBe(p0.slot);
      await a2p.release();
      const a3 = keep(await actor.acquirePermit('s', as));
      expect(a3.slot).toBe(p0.slot);
      expect(w1.settled).toBe(false);
      const head = await admin.get(`${prefix}none`).exec();
      await admin.kv.compact({ revision: head.header.revision, physical: true });
      proxy.setMode('pass');

      // w1 learns it holds from a fresh read and claims the slot p1 left (a lower token).
      const w1p = keep(
        await waitFor(() => w1.value, {
          what: 'w1 admitted after the cut',
          timeoutMs: 3 * defaults.callTimeoutMs + defaults.recheckIntervalMs,
        }),
      );
      expect(w1p.slot).toBe(p1.slot);
      expect(w1p.token).toBeGreaterThan(p1.token);
      await expectBeliefsMatchEtcd(admin, prefix, 's', 2, believed);

      // A waiter of each client behind the two holders, then etcd restarts.
      const w2 = track(cut.acquirePermit('s', { ...opts, session: cutSession }));
      await waitFor(async () => (await etcdView(admin, prefix, 's', 2)).keys.length === 3, {
        what: 'w2 queued',
      });
      const a4 = track(actor.acquirePermit('s', as));
      await waitFor(async () => (await etcdView(admin, prefix, 's', 2)).keys.length === 4, {
        what: 'a4 queued',
      });
      await etcd.members[0]!.kill();
      await etcd.members[0]!.start();
      admin.close();
      admin = etcdClient(etcd.endpoints);
      await waitFor(() => admin.get(`${prefix}none`).exec(), { what: 'etcd back' });
      expect(w1p.isHeld && a3.isHeld).toBe(true);
      expect([w2.settled, a4.settled]).toEqual([false, false]);
      await a3.release();
      const w2p = keep(
        await waitFor(() => w2.value, {
          what: 'w2 admitted after the restart',
          timeoutMs: 3 * defaults.callTimeoutMs + defaults.recheckIntervalMs,
        }),
      );
      expect(w2p.slot).toBe(a3.slot);
      expect(w2p.token).toBeGreaterThan(a3.token);
      expect(a4.settled).toBe(false);
      await expectBeliefsMatchEtcd(admin, prefix, 's', 2, believed);
      await w1p.release();
      const a4p = keep(await waitFor(() => a4.value, { what: 'a4 admitted' }));
      expect(a4p.slot).toBe(w1p.slot);
      await expectBeliefsMatchEtcd(admin, prefix, 's', 2, believed);
      await w2p.release();
      await a4p.release();
      await waitFor(async () => (await etcdView(admin, prefix, 's', 2)).keys.length === 0, {
        what: 'the queue empty',
      });
    } finally {
      admin.close();
    }
  }, 120_000);
});
