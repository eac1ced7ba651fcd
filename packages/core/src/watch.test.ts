import { describe, expect, it } from 'vitest';
import { fakeClock, flush, type FakeClock } from './clock.fake.js';
import { fakeEtcd, watchEvent } from './etcd.fake.js';
import { prefixEnd } from './keys.js';
import { tunables } from './options.js';
import { Watch, type WatchListener } from './watch.js';

const PREFIX = 'L/';
/** fakeEtcd's `options.callTimeoutMs`. */
const CALL_TIMEOUT_MS = 1_000;
const RECHECK_MS = 5_000;
/** Long enough that no periodic check runs during a test about something else. */
const NO_RECHECK = 3_600_000;

function setup(recheckIntervalMs = RECHECK_MS, active = () => false) {
  const clock = fakeClock();
  const fake = fakeEtcd();
  const watch = new Watch(fake.etcd, clock, PREFIX, recheckIntervalMs, active);
  return { clock, watch, ...fake };
}

/**
 * A listener that writes down what it hears, as `put L/a/1@5`, `delete L/a/1@6`, `unsure`; and,
 * apart, the reads it is handed, as `L/a/1,L/a/2@20`.
 */
function recorder() {
  const seen: string[] = [];
  const verified: string[] = [];
  const listener: WatchListener = {
    events: (batch) => {
      for (const e of batch) seen.push(`${e.kind} ${e.kv.key.toString()}@${e.revision}`);
    },
    unsure: () => seen.push('unsure'),
    read: (kvs, readAt) =>
      verified.push(`${kvs.map((kv) => kv.key.toString()).join(',')}@${readAt}`),
  };
  return { seen, verified, listener };
}

const put = (key: string, revision: bigint) => watchEvent('put', key, revision);
const del = (key: string, revision: bigint) => watchEvent('delete', key, revision);

/** Moves the clock in steps, letting promise callbacks run after each. */
async function run(clock: FakeClock, ms: number, step = 100) {
  for (let t = 0; t < ms; t += step) {
    clock.advance(Math.min(step, ms - t));
    await flush();
  }
}

describe('Watch stream', () => {
  it('opens nothing until the first subscribe, then one stream whose watch covers the prefix from `from`', async () => {
    const { watch, watches, clock } = setup();
    await flush();
    expect(watches).toHaveLength(0);
    expect(clock.pending).toBe(0);

    watch.subscribe('L/a/', 10n, recorder().listener);
    await flush();
    watch.subscribe('L/b/', 12n, recorder().listener);
    await flush();

    expect(watches).toHaveLength(1);
    const [create, ...rest] = watches[0]!.requests;
    expect(rest).toEqual([]);
    expect(create!.create_request!.key!.toString()).toBe(PREFIX);
    expect(create!.create_request!.range_end!.equals(prefixEnd(PREFIX))).toBe(true);
    expect(watches[0]!.creates).toEqual([10n]);
  });

  it('delivers events in order, only to subscribers of their range, from each one’s `from` on', async () => {
    const { watch, watches } = setup(NO_RECHECK);
    const a5 = recorder();
    const a7 = recorder();
    const b = recorder();
    const ab = recorder();
    watch.subscribe('L/a/', 5n, a5.listener);
    watch.subscribe('L/a/', 7n, a7.listener);
    watch.subscribe('L/b/', 5n, b.listener);
    watch.subscribe('L/ab/', 5n, ab.listener);
    await flush();
    const stream = watches[0]!;
    stream.created();
    stream.events(put('L/a/1', 5n), put('L/b/1', 5n), del('L/ab/x', 6n));
    stream.events(put('L/a/2', 7n));
    stream.events(del('L/a/1', 8n), put('L/b/1', 8n));

    expect(a5.seen).toEqual(['put L/a/1@5', 'put L/a/2@7', 'delete L/a/1@8']);
    expect(a7.seen).toEqual(['put L/a/2@7', 'delete L/a/1@8']);
    expect(b.seen).toEqual(['put L/b/1@5', 'put L/b/1@8']);
    expect(ab.seen).toEqual(['delete L/ab/x@6']);
  });

  it('stops delivering to a disposed subscription', async () => {
    const { watch, watches } = setup(NO_RECHECK);
    const a = recorder();
    const sub = watch.subscribe('L/a/', 5n, a.listener);
    await flush();
    watches[0]!.created();
    watches[0]!.events(put('L/a/1', 5n));
    sub[Symbol.dispose]();
    watches[0]!.events(put('L/a/2', 6n));
    expect(a.seen).toEqual(['put L/a/1@5']);
  });

  it('replays buffered events of its range to a late subscriber before subscribe returns', async () => {
    const { watch, watches } = setup(NO_RECHECK);
    watch.subscribe('L/a/', 5n, recorder().listener);
    await flush();
    const stream = watches[0]!;
    stream.created();
    stream.events(put('L/a/1', 5n), put('L/b/1', 6n), put('L/a/2', 7n));
    stream.events(del('L/a/1', 8n));

    const late = recorder();
    watch.subscribe('L/a/', 6n, late.listener);
    expect(late.seen).toEqual(['put L/a/2@7', 'delete L/a/1@8']); // synchronously

    stream.events(put('L/a/3', 9n));
    await flush();
    expect(late.seen).toEqual(['put L/a/2@7', 'delete L/a/1@8', 'put L/a/3@9']); // no unsure
  });

  it('tells a subscriber from before the watch’s start that it is unsure (in a microtask), and replays nothing', async () => {
    const { watch, watches } = setup(NO_RECHECK);
    watch.subscribe('L/a/', 10n, recorder().listener);
    await flush();
    watches[0]!.created();
    watches[0]!.events(put('L/a/1', 10n), put('L/a/2', 11n));

    const early = recorder();
    watch.subscribe('L/a/', 9n, early.listener);
    expect(early.seen).toEqual([]);
    const atStart = recorder();
    watch.subscribe('L/a/', 10n, atStart.listener);
    await flush();

    expect(early.seen).toEqual(['unsure']);
    expect(atStart.seen).toEqual(['put L/a/1@10', 'put L/a/2@11']);
  });

  it('tells a subscriber from before its replay window that it is unsure', async () => {
    const { watch, watches } = setup(NO_RECHECK);
    watch.subscribe('L/b/', 1n, recorder().listener);
    await flush();
    watches[0]!.created();
    const count = tunables.watchReplayEvents + 1; // one more than it keeps: revision 1 drops out
    watches[0]!.events(...Array.from({ length: count }, (_, i) => put('L/b/k', BigInt(i + 1))));

    const dropped = recorder();
    const kept = recorder();
    watch.subscribe('L/a/', 1n, dropped.listener);
    watch.subscribe('L/a/', 2n, kept.listener);
    await flush();
    expect(dropped.seen).toEqual(['unsure']);
    expect(kept.seen).toEqual([]);
  });

  it('after a stream error, reopens after a backoff, resumes after the last event, and has everyone re-check at once', async () => {
    // The member may have been restored from a snapshot meanwhile: events of another history
    // would look just as consistent, so nobody trusts them alone until the next read.
    const { watch, watches, clock, count, store } = setup(NO_RECHECK);
    const a = recorder();
    watch.subscribe('L/a/', 5n, a.listener);
    await flush();
    const first = watches[0]!;
    first.created();
    first.events(put('L/a/1', 5n), put('L/a/2', 6n));

    first.fail();
    expect(first.ended).toBe(true);
    await run(clock, tunables.retryMinMs - 1, 1);
    expect(watches).toHaveLength(1);
    await run(clock, 1, 1);
    expect(watches).toHaveLength(2);
    const second = watches[1]!;
    expect(second.creates).toEqual([7n]);

    first.events(put('L/a/3', 7n)); // the old stream is no longer listened to
    second.created();
    await flush();
    expect(a.seen).toEqual(['put L/a/1@5', 'put L/a/2@6', 'unsure']);
    expect(count('watch check')).toBe(1);
    expect(a.verified).toEqual([`@${store.revision}`]);
    second.events(put('L/a/3', 7n));
    expect(a.seen).toEqual(['put L/a/1@5', 'put L/a/2@6', 'unsure', 'put L/a/3@7']);
  });

  it('does not count a progress notification as delivered: a resumed stream starts after the last event', async () => {
    // etcd 3.4 answers a progress request with its current revision while the watch may still be
    // sending older events; resuming after that revision would lose them.
    const { watch, watches, clock } = setup(NO_RECHECK);
    const a = recorder();
    watch.subscribe('L/a/', 5n, a.listener);
    await flush();
    watches[0]!.created();
    watches[0]!.events(put('L/a/1', 5n));
    watches[0]!.progress(20);
    watches[0]!.emit('end');
    await run(clock, tunables.retryMinMs);
    expect(watches[1]!.creates).toEqual([6n]);
    expect(a.seen).toEqual(['put L/a/1@5']);
  });

  it('a cancel with compact_revision makes every subscriber unsure and restarts from the compact revision at once', async () => {
    const { watch, watches } = setup(NO_RECHECK);
    const a = recorder();
    const b = recorder();
    watch.subscribe('L/a/', 5n, a.listener);
    watch.subscribe('L/b/', 5n, b.listener);
    await flush();
    const first = watches[0]!;
    first.created();
    first.events(put('L/a/1', 5n));

    first.compacted(50, 60);
    expect(a.seen).toEqual(['put L/a/1@5', 'unsure']);
    expect(b.seen).toEqual(['unsure']);
    expect(first.ended).toBe(true);
    await flush(); // no backoff
    expect(watches).toHaveLength(2);
    expect(watches[1]!.creates).toEqual([50n]);

    const late = recorder();
    watch.subscribe('L/a/', 20n, late.listener); // before what it can now replay
    await flush();
    expect(late.seen).toEqual(['unsure']);
    const second = watches[1]!;
    second.created();
    second.events(put('L/a/9', 50n));
    expect(a.seen).toEqual(['put L/a/1@5', 'unsure', 'put L/a/9@50']);
  });

  it('a cancel without compact_revision is a broken stream: resumes from the last delivered revision + 1', async () => {
    const { watch, watches, clock } = setup(NO_RECHECK);
    const a = recorder();
    watch.subscribe('L/a/', 5n, a.listener);
    await flush();
    watches[0]!.created();
    watches[0]!.events(put('L/a/1', 8n));
    watches[0]!.respond({ canceled: true });
    await run(clock, tunables.retryMinMs);
    expect(watches[1]!.creates).toEqual([9n]);
    expect(a.seen).toEqual(['put L/a/1@8']);
    watches[1]!.created();
    expect(a.seen).toEqual(['put L/a/1@8', 'unsure']);
  });

  it('replaces a stream whose create is not confirmed within callTimeoutMs, and keeps a confirmed one', async () => {
    const { watch, watches, clock, stuck } = setup(NO_RECHECK);
    const a = recorder();
    watch.subscribe('L/a/', 5n, a.listener);
    await flush();
    clock.advance(CALL_TIMEOUT_MS - 1);
    expect(watches[0]!.cancelled).toBe(false);
    clock.advance(1);
    expect(watches[0]!.cancelled).toBe(true); // stuck: cancelled, not ended
    expect(stuck).toEqual([watches[0]]); // and its member rests before the next stream opens
    await run(clock, tunables.retryMinMs);
    expect(watches).toHaveLength(2);
    expect(watches[1]!.creates).toEqual([5n]);

    watches[1]!.created();
    await run(clock, 10 * CALL_TIMEOUT_MS, 500);
    expect(watches[1]!.cancelled).toBe(false);
    expect(watches).toHaveLength(2);
    expect(a.seen).toEqual([]);
  });

  it('backs off between reopen attempts, doubling up to retryMaxMs, and starts again from the minimum once confirmed', async () => {
    const { watch, watches, clock } = setup(NO_RECHECK);
    watch.subscribe('L/a/', 5n, recorder().listener);
    await flush();
    const opened: number[] = [clock.now()];
    for (let i = 0; i < 6; i++) {
      watches.at(-1)!.fail();
      const before = watches.length;
      while (watches.length === before) await run(clock, 50, 50);
      opened.push(clock.now());
    }
    const gaps = opened.slice(1).map((t, i) => t - opened[i]!);
    expect(gaps).toEqual([100, 200, 400, 800, 1_000, 1_000]);

    watches.at(-1)!.created();
    const t = clock.now();
    watches.at(-1)!.fail();
    const before = watches.length;
    while (watches.length === before) await run(clock, 50, 50);
    expect(clock.now() - t).toBe(tunables.retryMinMs);
  });
});

describe('Watch liveness check', () => {
  /** A live watch with subscribers `a` and `b` whose last event was at revision 5. */
  async function live() {
    const s = setup(RECHECK_MS);
    const a = recorder();
    const b = recorder();
    s.watch.subscribe('L/a/', 5n, a.listener);
    s.watch.subscribe('L/b/', 5n, b.listener);
    await flush();
    const stream = s.watches[0]!;
    stream.created();
    stream.events(put('L/a/1', 5n));
    s.store.revision = 20n; // the cluster moved on, outside what the stream has shown
    return { ...s, a, b, stream };
  }

  it('every recheckIntervalMs hands each subscriber its range from one read, and keeps a stream that answers a progress request', async () => {
    const { clock, stream, count, a, b, watches, store } = await live();
    store.put('L/a/1');
    store.put('L/a/2');
    store.put('L/c/1');
    await run(clock, RECHECK_MS - 100);
    expect(count('watch check')).toBe(0);
    await run(clock, 100);
    expect(count('watch check')).toBe(1);
    expect(a.verified).toEqual([`L/a/1,L/a/2@${store.revision}`]);
    expect(b.verified).toEqual([`@${store.revision}`]); // its range is empty
    expect(stream.progressRequests).toBe(1);

    stream.progress(1); // any answer proves it is alive, whatever its revision
    await run(clock, 2 * CALL_TIMEOUT_MS);
    expect(stream.cancelled || stream.ended).toBe(false);
    expect(watches).toHaveLength(1);
    expect(a.seen).toEqual(['put L/a/1@5']);
    expect(b.seen).toEqual([]);

    await run(clock, RECHECK_MS - 2 * CALL_TIMEOUT_MS + 100); // one interval after the first ended
    expect(count('watch check')).toBe(2);
    expect(stream.progressRequests).toBe(2);
  });

  it('events prove the stream as well as a progress notification', async () => {
    const { clock, stream, watches, a } = await live();
    await run(clock, RECHECK_MS);
    stream.events(put('L/a/2', 20n));
    await run(clock, 2 * CALL_TIMEOUT_MS);
    expect(stream.cancelled).toBe(false);
    expect(watches).toHaveLength(1);
    expect(a.seen).toEqual(['put L/a/1@5', 'put L/a/2@20']);
  });

  it('replaces a stream that does not answer within callTimeoutMs, makes every subscriber unsure, and resumes after the last event', async () => {
    const { clock, stream, watches, a, b } = await live();
    await run(clock, RECHECK_MS);
    await run(clock, CALL_TIMEOUT_MS - 100);
    expect(stream.cancelled).toBe(false);
    expect(a.seen).toEqual(['put L/a/1@5']);

    await run(clock, 100);
    expect(stream.cancelled).toBe(true);
    expect(a.seen).toEqual(['put L/a/1@5', 'unsure']);
    expect(b.seen).toEqual(['unsure']);
    await run(clock, tunables.retryMinMs);
    expect(watches).toHaveLength(2);
    expect(watches[1]!.creates).toEqual([6n]);
  });

  it('checks at once after a broken stream is re-created', async () => {
    const { clock, stream, watches, count } = await live();
    stream.emit('end');
    await run(clock, tunables.retryMinMs);
    expect(count('watch check')).toBe(0);
    watches[1]!.created();
    await flush();
    expect(count('watch check')).toBe(1);
  });

  it('a failed read is tried again every retryMaxMs and replaces nothing (the sessions’ deadlines cover an unreachable etcd)', async () => {
    const { clock, stream, watches, handlers, a, count } = await live();
    handlers.range = () => {
      throw new Error('etcd is down (fake)');
    };
    await run(clock, RECHECK_MS + 3 * tunables.retryMaxMs);
    expect(count('watch check')).toBe(4); // unsure subscribers may be waiting for a read
    expect(stream.progressRequests).toBe(0);
    expect(stream.cancelled).toBe(false);
    expect(watches).toHaveLength(1);
    expect(a.seen).toEqual(['put L/a/1@5']);
  });

  it('runs no check without subscribers, and starts again with the next one', async () => {
    const { watch, watches, clock, count } = setup(RECHECK_MS);
    const sub = watch.subscribe('L/a/', 5n, recorder().listener);
    await flush();
    watches[0]!.created();
    sub[Symbol.dispose]();
    await run(clock, 4 * RECHECK_MS, 500);
    expect(count('watch check')).toBe(0);
    expect(clock.pending).toBe(0);

    watch.subscribe('L/a/', 5n, recorder().listener);
    await run(clock, RECHECK_MS, 500);
    expect(count('watch check')).toBe(1);
  });
});

describe('Watch close', () => {
  it('ends the stream, stops its timers and delivers nothing more', async () => {
    const { watch, watches, clock, count } = setup(RECHECK_MS);
    const a = recorder();
    watch.subscribe('L/a/', 5n, a.listener);
    await flush();
    watches[0]!.created();
    watch.close();
    expect(watches[0]!.ended).toBe(true);
    expect(clock.pending).toBe(0);

    watches[0]!.events(put('L/a/1', 5n));
    watches[0]!.fail();
    await run(clock, 4 * RECHECK_MS, 500);
    expect(watches).toHaveLength(1);
    expect(count('watch check')).toBe(0);
    expect(a.seen).toEqual([]);
  });

  it('cancels a stream that opens after close(), without creating a watch on it', async () => {
    const { watch, watches, clock } = setup(RECHECK_MS);
    watch.subscribe('L/a/', 5n, recorder().listener);
    watch.close();
    await flush();
    expect(watches[0]!.cancelled).toBe(true);
    expect(watches[0]!.written).toEqual([]);
    expect(clock.pending).toBe(0);
  });

  it('opens nothing more when closed while waiting to reopen', async () => {
    const { watch, watches, clock } = setup(RECHECK_MS);
    watch.subscribe('L/a/', 5n, recorder().listener);
    await flush();
    watches[0]!.created();
    watches[0]!.fail();
    watch.close();
    await run(clock, 10_000, 100);
    expect(watches).toHaveLength(1);
  });
});

describe('Watch check without subscribers', () => {
  it('reads while the client has a live session, even with no stream open, and hands the whole read to onRead', async () => {
    let sessions = 1;
    const { watch, watches, clock, count, store } = setup(RECHECK_MS, () => sessions > 0);
    const reads: string[] = [];
    watch.onRead(({ kvs, readAt }) => reads.push(`${kvs.length}@${readAt}`));
    store.put('L/a/1');
    watch.wake();
    await run(clock, RECHECK_MS);
    expect(count('watch check')).toBe(1);
    expect(watches).toHaveLength(0); // no stream: only the read
    expect(reads).toEqual([`1@${store.revision}`]);
    sessions = 0;
    await run(clock, 3 * RECHECK_MS);
    expect(count('watch check')).toBe(1); // no session left: no more reads
  });

  it('reads a large prefix in pages at one revision', async () => {
    const { watch, clock, calls, store } = setup(RECHECK_MS, () => true);
    for (let i = 0; i < tunables.checkPageKeys + 5; i++)
      store.put(`L/q${String(i).padStart(5, '0')}/1`);
    const reads: number[] = [];
    watch.onRead(({ kvs }) => reads.push(kvs.length));
    watch.wake();
    await run(clock, RECHECK_MS);
    expect(reads).toEqual([tunables.checkPageKeys + 5]);
    const pages = calls.filter((what) => what === 'watch check');
    expect(pages).toHaveLength(2);
  });
});
