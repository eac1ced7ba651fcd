/**
 * What a queue is, on a real etcd: exactly the direct children of `<prefix><name>/`, changed a
 * revision at a time. One txn that deletes several candidates (`etcdctl del --prefix`) is one
 * change for observers and waiters alike; a queue whose prefix is nested inside another's
 * (`electionPrefix: '<base>a/'` beside the election `a` of `<base>`) never leaks into it.
 */
import { connect, defaults, type LeaderState, type Leasehold } from '@leasehold/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
const base = uniquePrefix('queue-shape');
const lockPrefix = `${base}lock/`;
const electionPrefix = `${base}election/`;
let watcher: Leasehold;
let candidates: Leasehold[] = [];

beforeAll(async () => {
  const open = () => connect({ endpoints, electionPrefix, lockPrefix });
  [watcher, ...candidates] = await Promise.all([open(), open(), open(), open()]);
});
afterAll(async () => {
  await Promise.all([watcher, ...candidates].map((c) => c.close()));
  admin.close();
});

/** `p`, or an error naming `what` after `ms`. */
async function within<T>(p: Promise<T>, what: string, ms = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** The next state within 10 s, or a failure naming `what`. */
async function nextState(states: AsyncIterator<LeaderState>, what: string): Promise<LeaderState> {
  const res = await within(states.next(), what);
  if (res.done) throw new Error(`${what}: the observation ended`);
  return res.value;
}

describe('one txn deleting several candidates is one change', () => {
  it('observe() after `del --prefix` of the first two of three candidates reports the third, and no deleted one', async () => {
    const name = 'multi-delete';
    const states = watcher.observe(name);
    expect((await nextState(states, 'initial state')).leader).toBeUndefined();
    const [a, b, c] = candidates as [Leasehold, Leasehold, Leasehold];
    const la = await a.campaign(name, 'a');
    expect((await nextState(states, 'a elected')).leader?.value).toBe('a');
    // b and c wait behind a.
    void b.campaign(name, 'b').catch(() => undefined);
    void c.campaign(name, 'c').catch(() => undefined);
    await waitFor(
      async () => (await admin.getAll().prefix(`${electionPrefix}${name}/`).keys()).length === 3,
      { what: 'three candidates in the queue' },
    );
    // One txn deletes the two oldest keys (a's and b's).
    const byCreate = await admin
      .getAll()
      .prefix(`${electionPrefix}${name}/`)
      .sort('Create', 'Ascend')
      .exec();
    const [first, second, third] = byCreate.kvs;
    expect(first!.key.toString()).toBe(la.key);
    await admin
      .if(first!.key, 'Create', '>', 0)
      .then(admin.delete().key(first!.key), admin.delete().key(second!.key))
      .commit();
    const next = await nextState(states, 'state after the multi-delete');
    expect(next.leader?.key).toBe(third!.key.toString());
    expect(await watcher.leader(name)).toMatchObject({ key: third!.key.toString() });
    await states.return?.();
  });

  it('`del --prefix` of the whole election reports "no leader" at once, then the next candidate', async () => {
    const name = 'delete-all';
    const states = watcher.observe(name);
    await nextState(states, 'initial state');
    const [a, b] = candidates as [Leasehold, Leasehold];
    await a.campaign(name, 'a');
    expect((await nextState(states, 'a elected')).leader?.value).toBe('a');
    void b.campaign(name, 'b').catch(() => undefined);
    await waitFor(
      async () => (await admin.getAll().prefix(`${electionPrefix}${name}/`).keys()).length === 2,
      { what: 'two candidates in the queue' },
    );
    await admin.delete().prefix(`${electionPrefix}${name}/`);
    expect((await nextState(states, 'after del --prefix')).leader).toBeUndefined();
    const again = await candidates[2]!.campaign(name, 'c');
    expect((await nextState(states, 'c elected')).leader?.key).toBe(again.key);
    await states.return?.();
  });
});

describe('a queue is the direct children of its prefix', () => {
  it("an election under a nested prefix is not a candidate of the outer prefix's election", async () => {
    // The nested client's election 'x' lives at `<electionPrefix>a/x/<lease>`: inside the range
    // of the outer election 'a'.
    const nested = await connect({
      endpoints,
      lockPrefix: `${base}nested-lock/`,
      electionPrefix: `${electionPrefix}a/`,
    });
    try {
      const inner = await nested.campaign('x', 'inner');
      expect(inner.key.startsWith(`${electionPrefix}a/x/`)).toBe(true);
      expect(await watcher.leader('a')).toBeUndefined();
      const states = watcher.observe('a');
      expect((await nextState(states, 'initial state of a')).leader).toBeUndefined();
      const started = performance.now();
      const outer = await candidates[0]!.campaign('a', 'outer', {
        signal: AbortSignal.timeout(10_000),
      });
      // Elected on its own join, not after the watch's periodic re-check.
      expect(performance.now() - started).toBeLessThan(defaults.recheckIntervalMs);
      expect((await nextState(states, 'outer elected')).leader?.key).toBe(outer.key);
      expect(await watcher.leader('a')).toMatchObject({ key: outer.key, value: 'outer' });
      await states.return?.();
      await outer.resign();
      await inner.resign();
    } finally {
      await nested.close();
    }
  });

  it('a lock under a nested prefix neither blocks nor names the holder of the outer lock', async () => {
    const nested = await connect({
      endpoints,
      lockPrefix: `${lockPrefix}jobs/`,
      electionPrefix: `${base}nested-election/`,
    });
    try {
      const inner = await nested.acquire('x');
      const outer = await watcher.tryAcquire('jobs');
      expect(await candidates[0]!.holder('jobs')).toMatchObject({ key: outer.key });
      await outer.release();
      expect(await candidates[0]!.holder('jobs')).toBeUndefined();
      await inner.release();
    } finally {
      await nested.close();
    }
  });
});

describe('values written by other tools', () => {
  it('a candidate value that is not UTF-8 (Go and etcdctl write any bytes) comes back exactly as valueBytes, and as value with U+FFFD', async () => {
    const raw = Buffer.from([0xff, 0xfe, 0x41]);
    const lease = admin.lease(10);
    const key = `${electionPrefix}bytes/${BigInt(await lease.grant()).toString(16)}`;
    await lease.put(key).value(raw);
    try {
      const leader = await watcher.leader('bytes');
      expect(leader?.value).toBe('\uFFFD\uFFFDA');
      expect(Buffer.from(leader!.valueBytes).equals(raw)).toBe(true);
      const states = watcher.observe('bytes');
      const state = await nextState(states, 'initial state');
      expect(Buffer.from(state.leader!.valueBytes).equals(raw)).toBe(true);
      await states.return?.();
    } finally {
      await lease.revoke();
    }
  });
});

describe('observe() as an async iterator', () => {
  it('two pending next() calls both settle, in order, and a third settles on close', async () => {
    const client = await connect({ endpoints, electionPrefix, lockPrefix });
    const states = client.observe('concurrent-next');
    const [first, second, third] = [states.next(), states.next(), states.next()];
    const one = await within(first, 'first next()');
    expect(one.done === false && one.value.leader).toBeUndefined();
    const leader = await candidates[1]!.campaign('concurrent-next', 'v');
    const two = await within(second, 'second next()');
    expect(two.done === false && two.value.leader?.key).toBe(leader.key);
    await client.close();
    expect(await within(third, 'third next() after close')).toEqual({
      value: undefined,
      done: true,
    });
    await leader.resign();
  });
});

describe('a key without a lease is not a queue member', () => {
  // Someone else's data (an `etcdctl put` without a lease) in a queue's range: it would never
  // leave, so a queue that counted it would be blocked for good, or name it as the holder. Each
  // grant is immediate; the timeouts only turn "blocked for good" into a failure.
  it('a lease-less key in a lock queue, a semaphore and an election neither blocks nor is named', async () => {
    const [a, b] = candidates as [Leasehold, Leasehold];
    await admin.put(`${lockPrefix}stray-lock/plain`).value('x');
    await admin.put(`${lockPrefix}stray-semaphore/1.plain`).value('x');
    await admin.put(`${electionPrefix}stray-election/plain`).value('x');

    await using lock = await within(
      a.acquire('stray-lock', { timeoutMs: 10_000 }),
      'acquire',
      15_000,
    );
    expect((await b.holder('stray-lock'))?.key).toBe(lock.key);
    const taken = await b.tryAcquire('stray-lock').catch((e: unknown) => e);
    expect(taken).toMatchObject({ code: 'LOCK_TAKEN', holderKey: lock.key });

    await using permit = await within(
      a.acquirePermit('stray-semaphore', { permits: 1, timeoutMs: 10_000 }),
      'acquirePermit',
      15_000,
    );
    const state = await b.semaphore('stray-semaphore');
    expect(state.holders.map((h) => h.key)).toEqual([permit.key]);
    expect(state.waiting).toEqual([]);

    await using leadership = await within(
      a.campaign('stray-election', 'a', { timeoutMs: 10_000 }),
      'campaign',
      15_000,
    );
    expect((await b.leader('stray-election'))?.key).toBe(leadership.key);
    expect((await b.candidates('stray-election')).map((c) => c.key)).toEqual([leadership.key]);
    const states = b.observe('stray-election');
    try {
      expect((await nextState(states, 'observed leader')).leader?.key).toBe(leadership.key);
    } finally {
      await states.return?.();
    }
  });

  it('behind an older lease-less key, the holder is the oldest member, not the first by key', async () => {
    const name = 'stray-then-members';
    const lease = admin.lease(30, { autoKeepAlive: false });
    const id = await lease.grant();
    try {
      await admin.put(`${lockPrefix}${name}/0-plain`).value('x'); // first, no lease
      await admin.put(`${lockPrefix}${name}/zzz`).value('older').lease(id);
      await admin.put(`${lockPrefix}${name}/aaa`).value('younger').lease(id);
      expect((await watcher.holder(name))?.key).toBe(`${lockPrefix}${name}/zzz`);
    } finally {
      await lease.revoke();
    }
  });
});

describe('candidates one txn created share a revision', () => {
  it('observe() and candidates() name the lower key first, whatever order the txn wrote them in', async () => {
    const name = 'one-txn-two';
    const states = watcher.observe(name);
    try {
      expect((await nextState(states, 'initial state')).leader).toBeUndefined();
      const lease = admin.lease(30, { autoKeepAlive: false });
      const id = await lease.grant();
      const [low, high] = [`${electionPrefix}${name}/a`, `${electionPrefix}${name}/b`];
      // The higher key first: the watch delivers the two events in the txn's order.
      await admin
        .if(low, 'Create', '==', 0)
        .then(admin.put(high).value('high').lease(id), admin.put(low).value('low').lease(id))
        .commit();
      // leader() asks etcd, whose sort leaves ties in no fixed order (as etcdctl and Go see it).
      expect((await nextState(states, 'leader after the txn')).leader?.key).toBe(low);
      expect((await watcher.candidates(name)).map((c) => c.key)).toEqual([low, high]);
      await lease.revoke();
      expect((await nextState(states, 'no leader after the revoke')).leader).toBeUndefined();
    } finally {
      await states.return?.();
    }
  });
});
