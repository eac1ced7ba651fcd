/**
 * `client.observe()` on a real etcd: the current state first, then every change in revision
 * order (every proclaim, every handover, "no leader"), the current state again after the watch
 * lost events to a cut connection and a compaction, and a clean end on abort, on close and on
 * `break`.
 */
import { connect, type LeaderState, type Leadership, type Leasehold } from '@leasehold/core';
import { startEtcd, TcpFaultProxy } from '@leasehold/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, onCleanup, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
const electionPrefix = uniquePrefix('observe');
const lockPrefix = uniquePrefix('observe-locks');
let watcher: Leasehold;
let candidate: Leasehold;
let other: Leasehold;

beforeAll(async () => {
  const open = () => connect({ endpoints, electionPrefix, lockPrefix });
  [watcher, candidate, other] = await Promise.all([open(), open(), open()]);
});
afterAll(async () => {
  await Promise.all([watcher, candidate, other].map((c) => c.close()));
  admin.close();
});

/** The iterator's next result, or an error naming `what` after `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
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

/** The next state the observer reports (fails the test if it ends or takes over `ms`). */
async function nextState(
  states: AsyncIterator<LeaderState>,
  what: string,
  ms = 10_000,
): Promise<LeaderState> {
  const res = await within(states.next(), ms, what);
  if (res.done) throw new Error(`${what}: the observation ended`);
  return res.value;
}

/** Counts the observer's reads of an election (read only: the call goes on unchanged). */
function countObserveReads(client: Leasehold): { reads: number } {
  const counter = { reads: 0 };
  const etcd = (
    client as unknown as { etcd: { call: (what: string, ...rest: unknown[]) => unknown } }
  ).etcd;
  const call = etcd.call.bind(etcd);
  etcd.call = (what, ...rest) => {
    if (what === 'election observe') counter.reads++;
    return call(what, ...rest);
  };
  return counter;
}

/** The leader as the observer should report it. */
const asHolder = (l: Leadership, value = l.value) => ({
  value,
  valueBytes: new Uint8Array(Buffer.from(value)),
  token: l.token,
  key: l.key,
  leaseId: l.session.leaseId,
});

describe('observe: states in revision order', () => {
  it('yields the current state first: no leader, then a leader once one is elected', async () => {
    const states = watcher.observe('first-empty');
    const first = await nextState(states, 'initial state');
    expect(first.leader).toBeUndefined();
    expect(typeof first.revision).toBe('bigint');
    expect(first.revision > 0n).toBe(true);
    const leader = await candidate.campaign('first-empty', 'v1');
    const elected = await nextState(states, 'elected');
    expect(elected).toEqual({ leader: asHolder(leader), revision: leader.token });
    await states.return!();
    await leader.resign();
  });

  it('yields the current leader first when there is one', async () => {
    const leader = await candidate.campaign('first-leader', 'v1');
    await leader.proclaim('v2');
    const states = watcher.observe('first-leader');
    const first = await nextState(states, 'initial state');
    expect(first.leader).toEqual(asHolder(leader, 'v2'));
    expect(first.revision >= leader.token).toBe(true);
    await states.return!();
    await leader.resign();
  });

  it('sees every proclaimed value in order, also repeated values, with strictly increasing revisions', async () => {
    const leader = await candidate.campaign('proclaims', 'v0');
    const states = watcher.observe('proclaims');
    expect((await nextState(states, 'initial')).leader?.value).toBe('v0');
    const values = Array.from({ length: 60 }, (_, i) => (i % 10 === 9 ? `p${i - 1}` : `p${i}`));
    const revisions: bigint[] = [];
    for (const value of values) revisions.push(await leader.proclaim(value));
    // Read only now: nothing reported in the meantime may have been dropped or merged.
    const seen: LeaderState[] = [];
    for (let i = 0; i < values.length; i++) seen.push(await nextState(states, `proclaim ${i}`));
    expect(seen.map((s) => s.leader?.value)).toEqual(values);
    expect(seen.map((s) => s.revision)).toEqual(revisions);
    for (let i = 1; i < seen.length; i++)
      expect(seen[i]!.revision > seen[i - 1]!.revision).toBe(true);
    for (const s of seen) expect(s.leader?.token).toBe(leader.token);
    await leader.resign();
    expect((await nextState(states, 'resigned')).leader).toBeUndefined();
    await states.return!();
  });

  it('reports "no leader" when the last candidate resigns', async () => {
    const leader = await candidate.campaign('resign-empty', 'v');
    const states = watcher.observe('resign-empty');
    expect((await nextState(states, 'initial')).leader?.key).toBe(leader.key);
    await leader.resign();
    const after = await nextState(states, 'no leader');
    expect(after.leader).toBeUndefined();
    expect(after.revision > leader.token).toBe(true);
    await states.return!();
  });

  it('reports "no leader" after the leader\'s lease is revoked by someone else', async () => {
    const session = await candidate.session({ ttlSeconds: 10 });
    const leader = await candidate.campaign('revoked', 'v', { session });
    const states = watcher.observe('revoked');
    expect((await nextState(states, 'initial')).leader?.key).toBe(leader.key);
    const revoked = await admin.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    const after = await nextState(states, 'no leader after revoke');
    expect(after.leader).toBeUndefined();
    expect(after.revision).toBe(BigInt(revoked.header.revision));
    await states.return!();
    await session.close();
  });

  it('sees the handover from one leader to the next, with no "no leader" in between', async () => {
    const first = await candidate.campaign('handover', 'first');
    const waiting = other.campaign('handover', 'second');
    await waitFor(
      async () => (await admin.getAll().prefix(`${electionPrefix}handover/`).keys()).length === 2,
      { what: 'second candidate queued' },
    );
    const states = watcher.observe('handover');
    expect((await nextState(states, 'initial')).leader).toEqual(asHolder(first));
    await first.resign();
    const second = await waitFor(() => waiting, { what: 'second elected' });
    const after = await nextState(states, 'handover');
    expect(after.leader).toEqual(asHolder(second));
    await second.proclaim('second, proclaimed');
    expect((await nextState(states, 'proclaim')).leader).toEqual(
      asHolder(second, 'second, proclaimed'),
    );
    await second.resign();
    expect((await nextState(states, 'no leader')).leader).toBeUndefined();
    await states.return!();
  });

  it('ignores other elections, including one whose name extends this one', async () => {
    const states = watcher.observe('scoped');
    expect((await nextState(states, 'initial')).leader).toBeUndefined();
    const nested = await candidate.campaign('scoped/inner', 'not this one');
    const sibling = await other.campaign('scoped-sibling', 'nor this');
    const mine = await candidate.campaign('scoped', 'this one');
    expect((await nextState(states, 'own election')).leader).toEqual(asHolder(mine));
    await Promise.all([nested.resign(), sibling.resign(), mine.resign()]);
    expect((await nextState(states, 'no leader')).leader).toBeUndefined();
    await states.return!();
  });
});

describe('observe: ending', () => {
  it('ends (done, no error) when its signal aborts, also while a next() is pending', async () => {
    const controller = new AbortController();
    const states = watcher.observe('end-signal', { signal: controller.signal });
    await nextState(states, 'initial');
    const pending = states.next();
    controller.abort(new Error('stop observing'));
    expect(await within(pending, 2_000, 'end on abort')).toEqual({ value: undefined, done: true });
    expect(await states.next()).toEqual({ value: undefined, done: true });
  });

  it('with an already-aborted signal ends at once', async () => {
    const states = watcher.observe('end-aborted', { signal: AbortSignal.abort() });
    expect(await within(states.next(), 2_000, 'end')).toEqual({ value: undefined, done: true });
  });

  it('ends (done, no error) when the client closes', async () => {
    const client = await connect({ endpoints, electionPrefix, lockPrefix });
    const states = client.observe('end-close');
    await nextState(states, 'initial');
    const pending = states.next();
    const closing = client.close();
    expect(await within(pending, 5_000, 'end on close')).toEqual({ value: undefined, done: true });
    await closing;
    expect(await states.next()).toEqual({ value: undefined, done: true });
  });

  it('breaking out of for await ends it cleanly; a later change is not reported', async () => {
    const leader = await candidate.campaign('end-break', 'v');
    const states = watcher.observe('end-break');
    const seen: LeaderState[] = [];
    for await (const state of states) {
      seen.push(state);
      break;
    }
    expect(seen.map((s) => s.leader?.key)).toEqual([leader.key]);
    await leader.proclaim('after break');
    await leader.resign();
    expect(await within(states.next(), 2_000, 'after break')).toEqual({
      value: undefined,
      done: true,
    });
  });
});

describe('observe: compaction while cut off', () => {
  it('reports the current leader and value after changes it missed were compacted away', async () => {
    await using etcd = await startEtcd({ provider: 'local', members: 1 });
    await using proxy = await TcpFaultProxy.start({ target: etcd.endpoints[0]! });
    const raw = etcdClient(etcd.endpoints);
    const prefix = uniquePrefix('observe-compact');
    await using observer = await connect({
      endpoints: [proxy.url],
      electionPrefix: prefix,
      lockPrefix: uniquePrefix('observe-compact-locks'),
      callTimeoutMs: 1_000,
    });
    onCleanup(observer, () => {});
    const spy = countObserveReads(observer);
    await using actor = await connect({ endpoints: etcd.endpoints, electionPrefix: prefix });
    const sessionA = await actor.session({ ttlSeconds: 30 });
    const sessionB = await actor.session({ ttlSeconds: 30 });
    try {
      /** Cuts the observer off, runs `changes` and compacts them away, then heals. */
      const whileCut = async (changes: () => Promise<void>) => {
        const readsBefore = spy.reads;
        proxy.setMode('reset');
        await changes();
        const head = await raw.get(`${prefix}none`).exec();
        await raw.kv.compact({ revision: head.header.revision, physical: true });
        proxy.setMode('pass');
        return readsBefore;
      };
      /** The next state, which must come from a fresh read of the election. */
      const reread = async (
        states: AsyncIterator<LeaderState>,
        readsBefore: number,
        what: string,
      ) => {
        const state = await nextState(states, what, 20_000);
        expect(spy.reads, `${what}: the observer read the election again`).toBeGreaterThan(
          readsBefore,
        );
        return state;
      };
      const A = await actor.campaign('job', 'a1', { session: sessionA });
      const states = observer.observe('job');
      expect((await nextState(states, 'initial')).leader).toEqual(asHolder(A));

      // 0. Nothing changed while cut off: the reconnect alone reports nothing (no repeat).
      await whileCut(async () => {});
      const live = await A.proclaim('a1, live');
      const afterNothing = await nextState(states, 'live proclaim after an idle cut', 20_000);
      expect(afterNothing).toEqual({ leader: asHolder(A, 'a1, live'), revision: live });

      // 1. The same leader proclaimed twice.
      const cut1 = await whileCut(async () => {
        await A.proclaim('a2');
        await A.proclaim('a3');
      });
      const afterProclaims = await reread(states, cut1, 'after compacted proclaims');
      expect(afterProclaims.leader).toEqual(asHolder(A, 'a3'));

      // 2. A handover: B queued, A resigned, B proclaimed.
      let B: Leadership | undefined;
      const cut2 = await whileCut(async () => {
        const waiting = actor.campaign('job', 'b1', { session: sessionB });
        await waitFor(
          async () => (await raw.getAll().prefix(`${prefix}job/`).keys()).length === 2,
          { what: 'B queued' },
        );
        await A.resign();
        B = await waitFor(() => waiting, { what: 'B elected' });
        await B.proclaim('b2');
      });
      const afterHandover = await reread(states, cut2, 'after compacted handover');
      expect(afterHandover.leader).toEqual(asHolder(B!, 'b2'));
      expect(afterHandover.revision > afterProclaims.revision).toBe(true);

      // The watch follows live events again.
      await B!.proclaim('b3');
      expect((await nextState(states, 'live proclaim')).leader).toEqual(asHolder(B!, 'b3'));

      // 3. The last leader resigned.
      const cut3 = await whileCut(() => B!.resign());
      const afterResign = await reread(states, cut3, 'after compacted resign');
      expect(afterResign.leader).toBeUndefined();
      await states.return!();
    } finally {
      raw.close();
    }
  }, 120_000);
});
