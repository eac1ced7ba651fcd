import { describe, expect, it } from 'vitest';
import { deferred, fakeClock, flush } from './clock.fake.js';
import { fakeEtcd, fakeWatch } from './etcd.fake.js';
import { ClusterChangedError, EtcdRequestError, EtcdUnavailableError } from './errors.js';
import { Observer } from './observe.js';
import { Queue } from './queue.js';

function setup() {
  const clock = fakeClock();
  const fake = fakeEtcd();
  const watch = fakeWatch('E/');
  const queue = new Queue(fake.etcd, watch.watch, clock, () => {}, 'election');
  const controller = new AbortController();
  const closed = new AbortController();
  const observer = Observer.start(queue, 'e', { signal: controller.signal }, closed.signal);
  const seen: [string | undefined, bigint][] = [];
  // Errors are asserted through `observer.next()` by the tests that expect them.
  void (async () => {
    for await (const state of observer) seen.push([state.leader?.value, state.revision]);
  })().catch(() => undefined);
  /** The states reported since the last call. */
  const take = async () => {
    await flush();
    return seen.splice(0);
  };
  return { clock, watch, observer, controller, closed, take, ...fake };
}

describe('observe', () => {
  it('reports the state now first, "no leader" included', async () => {
    const { take } = setup();
    expect(await take()).toEqual([[undefined, 1n]]);
  });

  it('reports leader changes and every proclaim in revision order, and nothing for a candidate joining behind', async () => {
    const { take, store, watch } = setup();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a1' }));
    watch.emit(store.put('E/e/b', { lease: 2, value: 'b1' }));
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a1' })); // proclaim, same value
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a2' }));
    watch.emit(store.delete('E/e/a'));
    watch.emit(store.delete('E/e/b'));
    expect(await take()).toEqual([
      ['a1', 2n],
      ['a1', 4n],
      ['a2', 5n],
      ['b1', 6n],
      [undefined, 7n],
    ]);
  });

  it('after unsure, re-reads and reports the state only if it differs, then applies events that came meanwhile', async () => {
    const { take, store, watch, handlers } = setup();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a1' }));
    expect(await take()).toEqual([['a1', 2n]]);
    const read = deferred();
    handlers.range = async (_what, _request, apply) => {
      await read.promise;
      return apply();
    };
    watch.unsure();
    watch.emit(store.put('E/e/b', { lease: 2, value: 'b1' })); // behind a: no change
    read.resolve();
    expect(await take()).toEqual([]);
    // Missed while unsure: a resigned, then the read shows b leading.
    store.delete('E/e/a');
    watch.unsure();
    expect(await take()).toEqual([['b1', 4n]]);
  });

  it('ends without an error on its signal and on client close', async () => {
    for (const end of ['controller', 'closed'] as const) {
      const { take, observer, ...rest } = setup();
      await take();
      rest[end].abort();
      expect(await observer.next()).toEqual({ value: undefined, done: true });
    }
  });

  it('a read that fails is retried until it answers', async () => {
    const clock = fakeClock();
    const fake = fakeEtcd();
    let failures = 2;
    fake.handlers.range = (_what, _request, apply) => {
      if (failures-- > 0) throw new EtcdUnavailableError('unavailable (fake)');
      return apply();
    };
    const watch = fakeWatch('E/');
    const queue = new Queue(fake.etcd, watch.watch, clock, () => {}, 'election');
    const observer = Observer.start(queue, 'e', {}, new AbortController().signal);
    const first = observer.next();
    await flush();
    clock.advance(100);
    await flush();
    clock.advance(200);
    await flush();
    expect((await first).value).toEqual({ leader: undefined, revision: 1n });
    expect(fake.count('election observe')).toBe(3);
  });
});

describe('observe: one revision, one state; reads heal it', () => {
  it('a txn that deletes several candidates is one change: the next leader is the one left, and no deleted candidate is reported in between', async () => {
    const { take, store, watch } = setup();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a' }));
    watch.emit(store.put('E/e/b', { lease: 2, value: 'b' }));
    watch.emit(store.put('E/e/c', { lease: 3, value: 'c' }));
    expect(await take()).toEqual([['a', 2n]]);
    watch.emit(...store.deleteAll('E/e/a', 'E/e/b'));
    expect(await take()).toEqual([['c', 5n]]);
    watch.emit(...store.deleteAll('E/e/c'));
    expect(await take()).toEqual([[undefined, 6n]]);
  });

  it('a whole election deleted in one txn reports "no leader", not the second candidate', async () => {
    const { take, store, watch } = setup();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a' }));
    watch.emit(store.put('E/e/b', { lease: 2, value: 'b' }));
    await take();
    watch.emit(...store.deleteAll('E/e/a', 'E/e/b'));
    expect(await take()).toEqual([[undefined, 4n]]);
  });

  it("a view that went wrong (events it never got) is healed by the watch's periodic read", async () => {
    const { take, store, watch, clock } = setup();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a' }));
    watch.emit(store.put('E/e/b', { lease: 2, value: 'b' }));
    expect(await take()).toEqual([['a', 2n]]);
    store.delete('E/e/a'); // never delivered
    watch.read(store); // one read that disagrees may be ahead of events on their way
    expect(await take()).toEqual([]);
    clock.advance(1_000); // an attempt's deadline, in which a live stream delivers what it has
    watch.read(store); // a second, with no event in between: the view went wrong
    expect(await take()).toEqual([['b', 4n]]);
    watch.read(store); // agrees now: nothing more
    expect(await take()).toEqual([]);
  });

  it('two reads that disagree within one attempt deadline prove nothing: a slow stream drops no state', async () => {
    const { take, store, watch, clock } = setup();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a' }));
    expect(await take()).toEqual([['a', 2n]]);
    // b's term is on its way down a stream that is slow (a loaded host), not broken.
    const events = [
      store.put('E/e/b', { lease: 2, value: 'b' }),
      store.delete('E/e/a'),
      store.put('E/e/b', { lease: 2, value: 'b2' }),
    ];
    watch.read(store);
    clock.advance(999);
    watch.read(store); // the view has not moved, but the stream had less than a deadline
    for (const e of events) watch.emit(e);
    watch.emit(store.put('E/e/c', { lease: 3, value: 'c' }));
    expect(await take()).toEqual([
      ['b', 4n],
      ['b2', 5n],
    ]);
  });

  it('a read that disagrees only because events are still on their way drops no state', async () => {
    const { take, store, watch } = setup();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a' }));
    expect(await take()).toEqual([['a', 2n]]);
    // b's whole term and a "no leader" happen before the watch's read; their events arrive after.
    const events = [
      store.put('E/e/b', { lease: 2, value: 'b' }),
      store.delete('E/e/a'),
      store.delete('E/e/b'),
      store.put('E/e/c', { lease: 3, value: 'c' }),
    ];
    watch.read(store); // c leads as of revision 6
    for (const e of events) watch.emit(e);
    watch.emit(store.put('E/e/d', { lease: 4, value: 'd' })); // the first event after the read
    expect(await take()).toEqual([
      ['b', 4n],
      [undefined, 5n],
      ['c', 6n],
    ]);
  });

  it('a read that disagrees with the view as of its own revision is healed at the next event', async () => {
    const { take, store, watch } = setup();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a' }));
    watch.emit(store.put('E/e/b', { lease: 2, value: 'b' }));
    await take();
    store.delete('E/e/a'); // never delivered
    watch.read(store); // b leads as of revision 4
    watch.emit(store.put('E/e/c', { lease: 3, value: 'c' })); // the view is still a's
    expect(await take()).toEqual([['b', 5n]]);
  });

  it('keys without a lease are not candidates (data someone put there)', async () => {
    const { take, store, watch } = setup();
    await take();
    watch.emit(store.put('E/e/0', { value: 'data' })); // no lease
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a' }));
    expect(await take()).toEqual([['a', 3n]]);
  });

  it('a refusal (a permission the user lacks) ends the iteration with the error instead of retrying for ever', async () => {
    const clock = fakeClock();
    const fake = fakeEtcd();
    const refused = new EtcdRequestError(
      'etcd election observe was refused: permission denied (fake)',
    );
    fake.handlers.range = () => {
      throw refused;
    };
    const watch = fakeWatch('E/');
    const queue = new Queue(fake.etcd, watch.watch, clock, () => {}, 'election');
    const observer = Observer.start(queue, 'e', {}, new AbortController().signal);
    await expect(observer.next()).rejects.toBe(refused);
  });

  it('a read older than its view is not judged', async () => {
    const { take, store, watch, observer } = setup();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a' }));
    await take();
    const sub = watch.live()[0]!;
    sub.listener.read([], 1n); // from before a joined
    expect(await take()).toEqual([]);
    await observer.return();
  });

  it('keys of a queue nested below the election are not its candidates', async () => {
    const { take, store, watch } = setup();
    store.put('E/e/x/9', { lease: 9, value: 'nested' }); // another election's, made first
    watch.unsure();
    await take();
    watch.emit(store.put('E/e/a', { lease: 1, value: 'a' }));
    expect(await take()).toEqual([['a', 3n]]);
    watch.read(store); // the read agrees: the nested key is not a candidate
    expect(await take()).toEqual([]);
  });
});

describe('observe: the iterator contract', () => {
  it('concurrent next() calls are served in call order, and every pending one settles when it ends', async () => {
    const clock = fakeClock();
    const fake = fakeEtcd();
    const watch = fakeWatch('E/');
    const queue = new Queue(fake.etcd, watch.watch, clock, () => {}, 'election');
    const closed = new AbortController();
    const observer = Observer.start(queue, 'e', {}, closed.signal);
    const [first, second, third] = [observer.next(), observer.next(), observer.next()];
    await flush();
    watch.emit(fake.store.put('E/e/a', { lease: 1, value: 'a' }));
    const [one, two] = [await first, await second];
    expect(one.done === false && one.value.leader).toBeUndefined();
    expect(two.done === false && two.value.leader?.value).toBe('a');
    const fourth = observer.next();
    closed.abort();
    expect(await third).toEqual({ value: undefined, done: true });
    expect(await fourth).toEqual({ value: undefined, done: true });
  });

  it('pending next() calls reject with the error the observer ends with', async () => {
    const clock = fakeClock();
    const fake = fakeEtcd();
    const watch = fakeWatch('E/');
    const queue = new Queue(fake.etcd, watch.watch, clock, () => {}, 'election');
    const observer = Observer.start(queue, 'e', {}, new AbortController().signal);
    await observer.next();
    const [a, b] = [observer.next(), observer.next()];
    const err = new ClusterChangedError(0n, 'revision went back (fake)');
    fake.change(err);
    await expect(a).rejects.toBe(err);
    await expect(b).rejects.toBe(err);
  });
});

describe('observe and the cluster', () => {
  it('throws ClusterChangedError from the loop when the client meets another cluster', async () => {
    const { take, observer, change } = setup();
    await take();
    const err = new ClusterChangedError(0n, 'revision went back (fake)');
    change(err);
    await expect(observer.next()).rejects.toBe(err);
  });
});
