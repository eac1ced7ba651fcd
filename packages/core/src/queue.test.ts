import type { ICompare, IKeyValue, ITxnRequest, ITxnResponse } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { deferred, fakeClock, flush, track, type FakeClock } from './clock.fake.js';
import { fakeEtcd, fakeWatch, type FakeCall } from './etcd.fake.js';
import {
  EtcdRequestError,
  EtcdUnavailableError,
  isEtcdRequestError,
  isEtcdUnavailableError,
  isLeaseLostError,
  isSessionClosedError,
  type LockLostReason,
} from './errors.js';
import { firstOf, Queue, type Entry, type LostError } from './queue.js';
import { Session } from './session.js';

/** The lease the fake grants first (255), as it appears in key names. */
const LEASE = 255n;
const KEY = `L/m/${LEASE.toString(16)}`;

/** What the entry's handle would throw: the reason and cause, for assertions. */
class Lost extends Error {
  constructor(
    readonly reason: LockLostReason,
    readonly key: string,
    override readonly cause?: unknown,
  ) {
    super(`lost: ${reason}`);
  }
}
const lostError: LostError = (reason, entry, cause) => new Lost(reason, entry.key, cause);
const reasonOf = (entry: Entry) => (entry.signal.reason as Lost | undefined)?.reason;

async function setup() {
  const clock = fakeClock();
  const fake = fakeEtcd();
  const sessionReports: Error[] = [];
  // A long TTL: the session outlives every clock movement below.
  const session = await Session.create(fake.etcd, clock, (e) => sessionReports.push(e), {
    ttlSeconds: 3_600,
    safetyMarginMs: 0,
  });
  await flush();
  const reports: Error[] = [];
  const watch = fakeWatch('L/');
  const sessionOf = (leaseId: string) =>
    leaseId === session.leaseId.toString() ? session : undefined;
  const queue = new Queue(fake.etcd, watch.watch, clock, (e) => reports.push(e), 'lock', sessionOf);
  const join = (signal = new AbortController().signal) =>
    queue.join('m', session, { value: Buffer.from('v'), signal, lostError });
  return { clock, session, queue, watch, reports, join, ...fake };
}

/** Moves the clock in steps, letting promise callbacks run after each. */
async function run(clock: FakeClock, ms: number, step = 100) {
  for (let t = 0; t < ms; t += step) {
    clock.advance(Math.min(step, ms - t));
    await flush();
  }
}

describe('firstOf', () => {
  const kv = (key: string, revision: number) =>
    ({ key: Buffer.from(key), create_revision: String(revision), lease: '1' }) as IKeyValue;

  it('is the oldest key, and of keys one txn created, the lower key, in any input order', () => {
    const [a5, b5, c7, d3] = [kv('q/a', 5), kv('q/b', 5), kv('q/c', 7), kv('q/d', 3)];
    expect(firstOf([a5, b5, c7])).toBe(a5);
    expect(firstOf([c7, b5, a5])).toBe(a5);
    expect(firstOf([b5, c7, d3, a5])).toBe(d3);
    expect(firstOf([])).toBeUndefined();
  });
});

describe('Queue join', () => {
  it('an entry with no keys ahead is first at once, with its create revision as token', async () => {
    const { join, store, watch, count } = await setup();
    store.put('L/other/1', { lease: 7 }); // another queue
    const entry = await join();
    expect(entry.isFirst).toBe(true);
    expect(entry.key).toBe(KEY);
    expect(entry.token).toBe(BigInt(store.get(KEY)!.create_revision));
    expect(store.get(KEY)!.lease).toBe(LEASE.toString());
    expect(entry.holder).toBeUndefined();
    await entry.waitFirst(new AbortController().signal);
    expect(watch.subs.map((s) => [s.range, s.from])).toEqual([['L/m/', entry.token + 1n]]);
    expect(count('queue check')).toBe(0);
  });

  it('adopts its own key left by a join whose answer was lost, keeping its create revision', async () => {
    const { join, store } = await setup();
    store.put('L/m/a', { lease: 7 });
    store.put(KEY, { lease: LEASE });
    const token = BigInt(store.get(KEY)!.create_revision);
    store.put('L/m/z', { lease: 8 }); // behind it
    const entry = await join();
    expect(entry.token).toBe(token);
    expect(entry.isFirst).toBe(false);
    expect(entry.holder?.key.toString()).toBe('L/m/a');
  });

  it('with keys ahead, becomes first exactly when the last of them is deleted, with no read after the event', async () => {
    const { join, store, watch, count } = await setup();
    store.put('L/m/a', { lease: 7 });
    store.put('L/m/b', { lease: 8 });
    const entry = await join();
    store.put('L/m/z', { lease: 9 }); // behind it
    expect(entry.isFirst).toBe(false);
    expect(entry.holder?.key.toString()).toBe('L/m/a');
    const first = track(entry.waitFirst(new AbortController().signal));

    watch.emit(store.delete('L/m/z')); // behind: does not count
    watch.emit(store.put('L/m/a', { lease: 7, value: 'x' })); // a put: does not count
    watch.emit(store.delete('L/m/b'));
    await flush();
    expect(entry.isFirst).toBe(false);
    expect(first.settled).toBe(false);

    watch.emit(store.delete('L/m/a'));
    expect(entry.isFirst).toBe(true); // on the event itself
    await flush();
    expect(first.settled).toBe(true);
    expect(first.error).toBeUndefined();
    expect(count('queue check')).toBe(0);
  });

  it('rejects at once with signal.reason when aborted during the join txn, and removes the key by its create revision once the txn answers', async () => {
    const { join, store, txns, handlers, count } = await setup();
    const answer = deferred();
    handlers.txn = async (what, _request, apply) => {
      const res = apply(); // etcd applies it; the answer is slow
      if (what === 'lock join') await answer.promise;
      return res;
    };
    const controller = new AbortController();
    const joined = track(join(controller.signal));
    await flush();
    const reason = new Error('caller gave up');
    controller.abort(reason);
    await flush();
    expect(joined).toMatchObject({ settled: true, error: reason });
    expect(count('lock withdraw')).toBe(0); // not before the txn has settled
    expect(store.has(KEY)).toBe(true);
    const joinedAt = BigInt(store.get(KEY)!.create_revision);

    answer.resolve();
    await flush();
    const withdraw = txns.find((t) => t.what === 'lock withdraw')!;
    // Never by lease: a late duplicate of this delete would then remove the session's next key.
    expect(withdraw.request.compare).toEqual([
      expect.objectContaining<ICompare>({ target: 'Create', create_revision: joinedAt.toString() }),
    ]);
    expect(store.has(KEY)).toBe(false);
  });

  it('after a join that was refused or never answered, frees the slot at once (nothing to withdraw that it knows of)', async () => {
    const { join, handlers } = await setup();
    handlers.txn = (what, _request, apply) => {
      if (what === 'lock join') throw new EtcdRequestError('etcdserver: permission denied (fake)');
      return apply();
    };
    const refused = await join().catch((e: unknown) => e);
    expect(isEtcdRequestError(refused)).toBe(true);
    handlers.txn = (_what, _request, apply) => apply();
    const next = await join(AbortSignal.timeout(1_000)); // not stuck behind the refused one
    expect(next.isFirst).toBe(true);
  });

  it('sweeps a key of a live session that no entry owns, and leaves owned keys alone', async () => {
    const { join, store, queue, count } = await setup();
    const held = await join();
    store.put(`L/other/${LEASE.toString(16)}`, { lease: LEASE }); // a join that landed late
    store.put('L/third/1', { lease: 1 }); // someone else's
    queue.sweep(store.range({ key: Buffer.from('L/'), range_end: Buffer.from('L0') }).kvs);
    await flush();
    expect(count('lock sweep')).toBe(1);
    expect(store.has(`L/other/${LEASE.toString(16)}`)).toBe(false);
    expect(store.has('L/third/1')).toBe(true);
    expect(store.has(held.key)).toBe(true);
    expect(queue.busy(held.key)).toBeDefined();
  });

  it('rejects with signal.reason while waiting for this session’s earlier entry, sending nothing', async () => {
    const { join, count } = await setup();
    const earlier = await join();
    const controller = new AbortController();
    const later = track(join(controller.signal));
    await flush();
    controller.abort(new Error('stop'));
    await flush();
    expect(later.error).toMatchObject({ message: 'stop' });
    expect(count('lock join')).toBe(1);
    expect(earlier.isFirst).toBe(true);
  });
});

describe('Entry end', () => {
  it('a txn that deletes its predecessor and its own key (del --prefix) never makes it first, not even for a moment', async () => {
    const { join, store, watch } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    const firsts: boolean[] = [];
    const first = track(entry.waitFirst(new AbortController().signal));
    // 'L/m/a' sorts before the entry's own key: a revision's events in key order.
    const events = store.deleteAll('L/m/a', KEY);
    expect(events.map((e) => e.kv.key.toString())).toEqual(['L/m/a', KEY]);
    watch.emit(...events);
    firsts.push(entry.isFirst);
    await flush();
    expect(firsts).toEqual([false]);
    expect((first.error as Lost).reason).toBe('expired-in-queue');
  });

  it('keys of a queue nested below its own are neither ahead of it nor its holder', async () => {
    const { join, store } = await setup();
    store.put('L/m/x/1', { lease: 7, value: 'nested' }); // another queue's (prefix 'L/m/x/')
    const entry = await join();
    expect(entry.isFirst).toBe(true);
    expect(entry.holder).toBeUndefined();
  });

  it('a delete of its own key before it is first rejects waitFirst with the lostError (expired-in-queue)', async () => {
    const { join, store, watch } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    const first = track(entry.waitFirst(new AbortController().signal));
    watch.emit(store.delete(KEY));
    await flush();
    expect(first.error).toBeInstanceOf(Lost);
    expect((first.error as Lost).reason).toBe('expired-in-queue');
    expect((first.error as Lost).key).toBe(KEY);
    expect(entry.signal.aborted).toBe(true);
    watch.emit(store.delete('L/m/a'));
    expect(entry.isFirst).toBe(false); // never first after its key vanished
  });

  it('a delete of its own key after it is first ends it (deleted)', async () => {
    const { join, store, watch } = await setup();
    const entry = await join();
    expect(entry.isFirst).toBe(true);
    watch.emit(store.delete(KEY));
    expect(reasonOf(entry)).toBe('deleted');
    expect(entry.isFirst).toBe(false);
  });

  it('a put on its own key with another lease ends it (overwritten); its own put does not', async () => {
    const { join, store, watch } = await setup();
    const entry = await join();
    watch.emit(store.put(KEY, { lease: LEASE, value: 'proclaimed' }));
    expect(entry.signal.aborted).toBe(false);
    expect(entry.isFirst).toBe(true);
    watch.emit(store.put(KEY, { lease: 7 }));
    expect(reasonOf(entry)).toBe('overwritten');
    expect(entry.isFirst).toBe(false);
  });

  it('ends with reason session when its session is lost; a waiter rejects with the session’s error', async () => {
    const { join, session, store } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    const first = track(entry.waitFirst(new AbortController().signal));
    await session.close();
    await flush();
    expect(reasonOf(entry)).toBe('session');
    expect(isSessionClosedError((entry.signal.reason as Lost).cause)).toBe(true);
    expect(first.error).toBe(session.signal.reason);
  });

  it('waitFirst rejects with the caller’s reason on abort and withdraws the key, guarded by its create revision', async () => {
    const { join, store, txns } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    const controller = new AbortController();
    const first = track(entry.waitFirst(controller.signal));
    controller.abort(new Error('timeout'));
    await flush();
    expect(first.error).toMatchObject({ message: 'timeout' });
    const withdraw = txns.find((t) => t.what === 'lock withdraw')!;
    expect(withdraw.request.compare).toEqual([
      expect.objectContaining<ICompare>({
        target: 'Create',
        create_revision: entry.token.toString(),
      }),
    ]);
    expect(store.has(KEY)).toBe(false);
    expect(store.has('L/m/a')).toBe(true);
  });

  it('an entry ended by an event replayed while it subscribes stops listening', async () => {
    const { join, store, watch, handlers } = await setup();
    store.put('L/m/a', { lease: 7 });
    handlers.txn = (what, _request, apply) => {
      const res = apply();
      // The shared watch is ahead of this answer: its buffer already holds the key's delete.
      if (what === 'lock join') watch.replay.push(store.delete(KEY));
      return res;
    };
    const entry = await join();
    await flush();
    expect(reasonOf(entry)).toBe('expired-in-queue');
    expect(watch.live()).toEqual([]);
  });
});

describe('Entry and the watch’s reads of its queue', () => {
  it('a holder whose key is gone from a read (a missed delete, a restored history) ends', async () => {
    const { join, store, watch } = await setup();
    const entry = await join();
    expect(entry.isFirst).toBe(true);
    store.delete(KEY); // the watch never tells
    watch.read(store);
    expect(entry.isFirst).toBe(false);
    expect((entry.signal.reason as Lost).reason).toBe('deleted');
  });

  it('a waiter whose predecessor is gone from a read becomes first', async () => {
    const { join, store, watch } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    store.delete('L/m/a'); // the watch never tells
    watch.read(store);
    expect(entry.isFirst).toBe(true);
  });

  it('a read that agrees with what it believes changes nothing, and costs no read of its own', async () => {
    const { join, store, watch, count } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    watch.read(store);
    expect(entry.isFirst).toBe(false);
    expect(count('queue check')).toBe(0);
  });

  it('a read that finds its key under another lease ends it (overwritten)', async () => {
    const { join, store, watch } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    store.put(KEY, { lease: 7 }); // the watch missed this
    watch.read(store);
    expect(reasonOf(entry)).toBe('overwritten');
  });

  it('a read from before it joined cannot settle it', async () => {
    const { join, store, watch } = await setup();
    store.put('L/m/a', { lease: 7 });
    const before = store.range({ key: Buffer.from('L/m/'), range_end: Buffer.from('L/m0') });
    const entry = await join();
    watch.unsure();
    watch.emit(store.delete('L/m/a'));
    for (const sub of watch.live()) sub.listener.read(before.kvs, BigInt(before.header.revision));
    expect(entry.isFirst).toBe(false); // still unsure: the read does not even know its key
    watch.read(store);
    expect(entry.isFirst).toBe(true);
  });
});

describe('Entry while unsure', () => {
  it('events alone never make it first; the next read decides', async () => {
    const { join, store, watch } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    watch.unsure();
    watch.emit(store.delete('L/m/a'));
    expect(entry.isFirst).toBe(false);
    watch.read(store);
    expect(entry.isFirst).toBe(true);
  });

  it('an event cannot make it first after a missed delete of its own key: the read finds the key gone', async () => {
    const { join, store, watch } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    const first = track(entry.waitFirst(new AbortController().signal));
    store.delete(KEY); // the watch missed this (or it never existed in this history)
    watch.unsure();
    watch.emit(store.delete('L/m/a'));
    expect(entry.isFirst).toBe(false);
    watch.read(store);
    await flush();
    expect(entry.isFirst).toBe(false);
    expect((first.error as Lost).reason).toBe('expired-in-queue');
  });

  it('intersects a read with deletes seen since it was taken: a key deleted after the read does not come back', async () => {
    const { join, store, watch } = await setup();
    store.put('L/m/a', { lease: 7 });
    store.put('L/m/b', { lease: 8 });
    const entry = await join();
    watch.unsure();
    const taken = store.range({ key: Buffer.from('L/m/'), range_end: Buffer.from('L/m0') });
    watch.emit(store.delete('L/m/a')); // after the read's revision, before its answer
    for (const sub of watch.live()) sub.listener.read(taken.kvs, BigInt(taken.header.revision));
    expect(entry.isFirst).toBe(false); // b is still ahead

    watch.emit(store.delete('L/m/b'));
    expect(entry.isFirst).toBe(true);
  });
});

describe('Entry txn', () => {
  it('runs ops only while it owns its key (same create revision and lease) and returns the write’s revision', async () => {
    const { join, store, txns } = await setup();
    const entry = await join();
    const revision = await entry.txn('fenced write', [
      { request_put: { key: Buffer.from('data'), value: Buffer.from('1') } },
    ]);
    expect(revision).toBe(store.revision);
    expect(store.get('data')?.value.toString()).toBe('1');
    const compare = txns.at(-1)!.request.compare!;
    expect(compare).toEqual([
      expect.objectContaining<ICompare>({
        target: 'Create',
        create_revision: entry.token.toString(),
      }),
      expect.objectContaining<ICompare>({ target: 'Lease', lease: LEASE.toString() }),
    ]);
  });

  it.each<[string, LockLostReason, (store: ReturnType<typeof fakeEtcd>['store']) => void]>([
    ['another lease wrote its key', 'overwritten', (store) => void store.put(KEY, { lease: 7 })],
    ['its key was deleted', 'deleted', (store) => void store.delete(KEY)],
  ])('when %s, writes nothing and ends with %s', async (_case, reason, change) => {
    const { join, store } = await setup();
    const entry = await join();
    change(store); // the watch has not told it yet
    const write = entry.txn('fenced write', [
      { request_put: { key: Buffer.from('data'), value: Buffer.from('1') } },
    ]);
    await expect(write).rejects.toMatchObject({ reason });
    expect(store.has('data')).toBe(false);
    expect(reasonOf(entry)).toBe(reason);
  });
});

describe('Entry remove', () => {
  it('deletes its key, guarded by its create revision, once for repeated calls', async () => {
    const { join, store, count } = await setup();
    const entry = await join();
    await Promise.all([entry.remove('release'), entry.remove('release')]);
    expect(store.has(KEY)).toBe(false);
    expect(count('lock release')).toBe(1);
    expect(entry.signal.aborted).toBe(false); // a removal is not a loss
  });

  it('after a transient failure, reports once and keeps retrying in the background until it succeeds', async () => {
    const { join, store, handlers, clock, reports, count } = await setup();
    const entry = await join();
    let failures = 4;
    handlers.txn = (what, _request, apply) => {
      if (what === 'lock release' && failures-- > 0) {
        throw new EtcdUnavailableError('etcd is down (fake)');
      }
      return apply();
    };
    await entry.remove('release'); // resolves: the rest goes on in the background
    expect(reports).toHaveLength(1);
    expect(isEtcdUnavailableError(reports[0])).toBe(true);
    expect(store.has(KEY)).toBe(true);

    for (let i = 0; i < 3; i++) await run(clock, 1_000, 1_000); // one attempt per step
    expect(count('lock release')).toBe(4);
    expect(store.has(KEY)).toBe(true);
    await run(clock, 1_000, 1_000);
    expect(count('lock release')).toBe(5);
    expect(store.has(KEY)).toBe(false);

    await run(clock, 30_000, 1_000);
    expect(count('lock release')).toBe(5);
    expect(reports).toHaveLength(1);
  });

  it('after a refusal (EtcdRequestError), reports it and stops, and the session’s slot stays taken', async () => {
    const { join, store, handlers, clock, reports, count } = await setup();
    const entry = await join();
    const refusal = new EtcdRequestError('permission denied (fake)');
    handlers.txn = (what, _request, apply) => {
      if (what === 'lock release') throw refusal;
      return apply();
    };
    await entry.remove('release');
    expect(reports).toEqual([refusal]);
    await run(clock, 30_000, 1_000);
    expect(count('lock release')).toBe(1); // no spinning
    expect(store.has(KEY)).toBe(true);

    // The leftover key carries this session's lease: a later entry must not adopt it.
    const next = track(join());
    await flush();
    expect(next.settled).toBe(false);
    expect(count('lock join')).toBe(1);
  });

  it('leaves the session’s slot only once its key is gone: a second join on the same key waits for it', async () => {
    const { join, handlers, clock, count, store } = await setup();
    const entry = await join();
    let failures = 2;
    handlers.txn = (what, _request, apply) => {
      if (what === 'lock release' && failures-- > 0) {
        throw new EtcdUnavailableError('etcd is down (fake)');
      }
      return apply();
    };
    await entry.remove('release');
    const next = track(join());
    await flush();
    expect(count('lock join')).toBe(1);
    await run(clock, 1_000, 1_000); // the second attempt fails too
    expect(count('lock join')).toBe(1);
    expect(next.settled).toBe(false);

    await run(clock, 1_000, 1_000); // the third removes it
    expect(store.has(KEY)).toBe(true); // created again, by the second join
    expect(count('lock join')).toBe(2);
    const second = next.value!;
    expect(second.token).toBeGreaterThan(entry.token);
    expect(second.isFirst).toBe(true);
  });

  it('a second join while the first entry still waits is queued behind it, not merged into its key', async () => {
    const { join, store, watch, count } = await setup();
    store.put('L/m/a', { lease: 7 });
    const entry = await join();
    const next = track(join());
    await flush();
    expect(count('lock join')).toBe(1);
    watch.emit(store.delete('L/m/a'));
    await entry.waitFirst(new AbortController().signal);
    await flush();
    expect(next.settled).toBe(false);
    await entry.remove('release');
    await flush();
    expect(count('lock join')).toBe(2);
    expect(next.value!.token).toBeGreaterThan(entry.token);
  });
});

describe('Queue join adopting a key', () => {
  it("adopts this lease's own key with its token, but not a key of that name on another lease", async () => {
    const { join, store, session } = await setup();
    store.put(KEY, { lease: session.leaseId, value: 'kept' });
    const token = BigInt(store.get(KEY)!.create_revision);
    const entry = await join();
    expect(entry.token).toBe(token);
    expect(entry.value.toString()).toBe('kept');
    expect(entry.isFirst).toBe(true);
    await entry.remove('release');

    store.put(KEY, { lease: 7 }); // written by someone else under this lease's key name
    const foreign = await join();
    expect(reasonOf(foreign)).toBe('overwritten');
    await expect(foreign.waitFirst(new AbortController().signal)).rejects.toThrow(/overwritten/);
  });
});

describe('Queue join refused for a lease that is gone', () => {
  const refuse = (handlers: { txn: FakeCall<ITxnRequest, ITxnResponse> }) => {
    handlers.txn = (what, _request, apply) => {
      if (what === 'lock join') {
        throw new EtcdRequestError('etcdserver: requested lease not found (fake)');
      }
      return apply();
    };
  };

  it('ends the session as gone once the cluster confirms it, and rejects with its LeaseLostError', async () => {
    const { join, session, handlers, state, count } = await setup();
    refuse(handlers);
    state.leaseGone = true;
    const err = await join().catch((e: unknown) => e);
    expect(count('lease time-to-live')).toBe(1);
    expect(isLeaseLostError(err) && err.reason).toBe('gone');
    expect(session.isLost).toBe(true);
    expect(session.signal.reason).toBe(err);
  });

  it('does not believe the refusal when the cluster reports the lease alive (a foreign member)', async () => {
    const { join, session, handlers } = await setup();
    refuse(handlers);
    const err = await join().catch((e: unknown) => e);
    expect(isEtcdUnavailableError(err), String(err)).toBe(true);
    expect((err as Error).message).toMatch(/not believed/);
    expect(session.isLost).toBe(false);
  });
});
