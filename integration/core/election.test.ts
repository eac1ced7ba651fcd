/**
 * Elections on a real etcd, in one process: who is elected and when, what a term's token and
 * signal say, that a stale leader can neither proclaim nor resign over a newer term, and what
 * `lead()` does around its work. Other processes' moves (an operator deleting or overwriting a
 * key, revoking a lease) are made with a raw etcd3 client.
 */
import {
  connect,
  defaults,
  isCampaignTimeoutError,
  isLeadershipLostError,
  isLeadershipResignedError,
  isLeaseLostError,
  isSessionClosedError,
  type LeaderContext,
  type Leadership,
  type Leasehold,
  type LeaseholdError,
} from '@leasehold/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
const electionPrefix = uniquePrefix('election');
const dataPrefix = uniquePrefix('election-data');
let a: Leasehold;
let b: Leasehold;

beforeAll(async () => {
  const lockPrefix = uniquePrefix('election-locks');
  a = await connect({ endpoints, electionPrefix, lockPrefix });
  b = await connect({ endpoints, electionPrefix, lockPrefix });
});
afterAll(async () => {
  await Promise.all([a.close(), b.close()]);
  admin.close();
});

const keysOf = (election: string) => admin.getAll().prefix(`${electionPrefix}${election}/`).keys();
const rawKv = async (key: string) => (await admin.get(key).exec()).kvs[0];
const settled = <T>(p: Promise<T>) =>
  p.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error }),
  );

/** True if `p` is still unsettled after `ms`: a window for asserting that something does NOT happen. */
async function stillPending(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const window = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), ms)));
  try {
    return await Promise.race([
      p.then(
        () => false,
        () => false,
      ),
      window,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves with the signal's reason once it aborts. */
const abortReason = (signal: AbortSignal) =>
  new Promise<unknown>((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener('abort', () => resolve(signal.reason), { once: true });
  });

/** Waits until the election has exactly `n` candidate keys. */
const candidates = (election: string, n: number) =>
  waitFor(async () => (await keysOf(election)).length === n, {
    timeoutMs: 10_000,
    what: `${n} candidate keys in ${election}`,
  });

describe('campaign and resign', () => {
  it('elects the first candidate; a second waits; resign elects the next at once with a higher token', async () => {
    const first = await a.campaign('basic', 'one');
    expect(first.isLeader).toBe(true);
    expect(first.election).toBe('basic');
    expect(first.value).toBe('one');
    expect(first.key).toBe(`${electionPrefix}basic/${first.session.leaseId.toString(16)}`);
    const kv = await rawKv(first.key);
    expect(BigInt(kv!.create_revision)).toBe(first.token);
    expect(kv!.value.toString()).toBe('one');
    expect(first.guard).toEqual({ key: first.key, createRevision: first.token });
    expect(await a.leader('basic')).toEqual({
      value: 'one',
      valueBytes: new Uint8Array(Buffer.from('one')),
      token: first.token,
      key: first.key,
      leaseId: first.session.leaseId,
    });

    const second = b.campaign('basic', 'two');
    await candidates('basic', 2);
    expect(await stillPending(second, 500)).toBe(true);
    expect((await b.leader('basic'))?.value).toBe('one');

    const resignedAt = performance.now();
    await first.resign();
    const next = await waitFor(() => second, { timeoutMs: 5_000, what: 'second elected' });
    const handover = performance.now() - resignedAt;
    console.log(`[election] handover after resign took ${handover.toFixed(0)} ms`);
    // The next candidate learns from the delete event, not from the lease running out (TTL 10 s).
    expect(handover).toBeLessThan(defaults.recheckIntervalMs);
    expect(next.token > first.token).toBe(true);
    expect(next.value).toBe('two');
    expect(first.isLeader).toBe(false);
    expect(isLeadershipResignedError(first.signal.reason)).toBe(true);
    expect(await a.leader('basic')).toEqual({
      value: 'two',
      valueBytes: new Uint8Array(Buffer.from('two')),
      token: next.token,
      key: next.key,
      leaseId: next.session.leaseId,
    });
    await next.resign();
    expect(await a.leader('basic')).toBeUndefined();
    expect(await keysOf('basic')).toEqual([]);
  });

  it('proclaim changes the value client.leader() reports, guarded by the term', async () => {
    const leader = await a.campaign('proclaim', 'v1');
    const revision = await leader.proclaim('v2');
    expect(leader.value).toBe('v2');
    expect(await b.leader('proclaim')).toMatchObject({ value: 'v2', token: leader.token });
    const kv = await rawKv(leader.key);
    expect(BigInt(kv!.mod_revision)).toBe(revision);
    expect(BigInt(kv!.create_revision)).toBe(leader.token); // still the same term
    expect(BigInt(kv!.lease)).toBe(leader.session.leaseId); // still bound to the lease
    expect(await leader.proclaim('v2')).toBeGreaterThan(revision);
    expect(leader.isLeader).toBe(true);
    await leader.resign();
  });

  it('concurrent proclaims all land; value is the one etcd applied last', async () => {
    const leader = await a.campaign('proclaim-many', 'v');
    const values = Array.from({ length: 20 }, (_, i) => `c${i}`);
    const revisions = await Promise.all(values.map((v) => leader.proclaim(v)));
    expect(new Set(revisions).size).toBe(values.length);
    const last = values[revisions.indexOf(revisions.reduce((m, r) => (r > m ? r : m)))]!;
    expect(leader.value).toBe(last);
    expect(await a.leader('proclaim-many')).toMatchObject({ value: last, token: leader.token });
    await leader.resign();
  });

  it("a stale leader's proclaim after an external delete rejects with 'deleted' and writes nothing", async () => {
    const old = await a.campaign('stale-deleted', 'old');
    const waiting = b.campaign('stale-deleted', 'new');
    await candidates('stale-deleted', 2);
    await admin.delete().key(old.key); // an operator removes the leader's key
    const newer = await waitFor(() => waiting, { timeoutMs: 5_000, what: 'next leader' });
    const err = await old.proclaim('stale').catch((e: unknown) => e);
    expect(isLeadershipLostError(err)).toBe(true);
    if (!isLeadershipLostError(err)) return;
    expect(err.reason).toBe('deleted');
    expect(err.token).toBe(old.token);
    expect(err.key).toBe(old.key);
    expect(err.election).toBe('stale-deleted');
    expect(old.value).toBe('old');
    expect(await rawKv(old.key)).toBeUndefined(); // not re-created by the stale write
    expect((await rawKv(newer.key))?.value.toString()).toBe('new');
    expect(await a.leader('stale-deleted')).toMatchObject({ value: 'new', token: newer.token });
    await old.resign();
    expect(newer.isLeader).toBe(true);
    expect(await keysOf('stale-deleted')).toEqual([newer.key]);
    await newer.resign();
  });

  it("a stale leader's proclaim after an external overwrite rejects with 'overwritten' and never touches the next leader's key", async () => {
    const old = await a.campaign('stale-overwritten', 'old');
    const waiting = b.campaign('stale-overwritten', 'new');
    await candidates('stale-overwritten', 2);
    await admin.put(old.key).value('intruder'); // a put without the lease: no longer the term's key
    const err = await old.proclaim('stale').catch((e: unknown) => e);
    expect(isLeadershipLostError(err) && err.reason).toBe('overwritten');
    await waitFor(() => old.signal.aborted, { timeoutMs: 5_000, what: 'old leader lost' });
    expect(isLeadershipLostError(old.signal.reason) && old.signal.reason.reason).toBe(
      'overwritten',
    );
    // The overwritten key still blocked the queue: the old leader withdraws it, and the next
    // candidate is elected.
    const newer = await waitFor(() => waiting, { timeoutMs: 5_000, what: 'next leader' });
    expect(newer.token > old.token).toBe(true);
    const late = await old.proclaim('later').catch((e: unknown) => e);
    expect(isLeadershipLostError(late)).toBe(true);
    expect((await rawKv(newer.key))?.value.toString()).toBe('new');
    const values = await admin.getAll().prefix(`${electionPrefix}stale-overwritten/`).strings();
    expect(Object.values(values)).toEqual(['new']);
    await newer.resign();
  });

  it("a stale term's resign and proclaim never touch a newer term on the same key", async () => {
    const session = await a.session({ ttlSeconds: 10 });
    const old = await a.campaign('same-key', 'first', { session });
    await admin.delete().key(old.key);
    await waitFor(() => old.signal.aborted, { timeoutMs: 5_000, what: 'old term lost' });
    const newer = await a.campaign('same-key', 'second', { session });
    expect(newer.key).toBe(old.key); // one lease, one key name: only the create revision differs
    expect(newer.token > old.token).toBe(true);
    const err = await old.proclaim('stale').catch((e: unknown) => e);
    expect(isLeadershipLostError(err)).toBe(true);
    await old.resign();
    await old.resign();
    const kv = await rawKv(newer.key);
    expect(BigInt(kv!.create_revision)).toBe(newer.token);
    expect(kv!.value.toString()).toBe('second');
    expect(newer.isLeader).toBe(true);
    await newer.proclaim('still mine');
    expect((await a.leader('same-key'))?.value).toBe('still mine');
    await newer.resign();
    await session.close();
  });
});

describe("a term's signal says how it ended", () => {
  it("'deleted' when someone else deletes the key; onLost hears it", async () => {
    const leader = await a.campaign('reason-deleted', 'v');
    const heard: LeaseholdError[] = [];
    leader.onLost((e) => heard.push(e));
    await admin.delete().key(leader.key);
    const reason = await waitFor(() => abortReason(leader.signal), { timeoutMs: 5_000 });
    expect(isLeadershipLostError(reason)).toBe(true);
    if (!isLeadershipLostError(reason)) return;
    expect(reason.name).toBe('LeadershipLostError');
    expect(reason.code).toBe('LEADERSHIP_LOST');
    expect(reason.reason).toBe('deleted');
    expect(reason.token).toBe(leader.token);
    expect(leader.isLeader).toBe(false);
    expect(() => leader.throwIfLost()).toThrow(reason);
    await waitFor(() => heard.length === 1, { timeoutMs: 1_000, what: 'onLost called' });
    expect(heard[0]).toBe(reason);
    await leader.resign();
  });

  it("'overwritten' when someone else puts on the key", async () => {
    const leader = await a.campaign('reason-overwritten', 'v');
    await admin.put(leader.key).value('someone else');
    const reason = await waitFor(() => abortReason(leader.signal), { timeoutMs: 5_000 });
    expect(isLeadershipLostError(reason) && reason.reason).toBe('overwritten');
    await leader.resign();
  });

  it("'session' when the term's session is closed, with the session's error as cause", async () => {
    const session = await a.session({ ttlSeconds: 10 });
    const leader = await a.campaign('reason-session', 'v', { session });
    const heard: LeaseholdError[] = [];
    leader.onLost((e) => heard.push(e));
    await session.close();
    const reason = await waitFor(() => abortReason(leader.signal), { timeoutMs: 5_000 });
    expect(isLeadershipLostError(reason)).toBe(true);
    if (!isLeadershipLostError(reason)) return;
    expect(reason.reason).toBe('session');
    expect(isSessionClosedError(reason.cause)).toBe(true);
    await waitFor(() => heard.length === 1, { timeoutMs: 1_000, what: 'onLost called' });
    expect(heard[0]).toBe(reason);
    expect(await keysOf('reason-session')).toEqual([]); // the revoke took the key along
  });

  it('a lease revoked by someone else ends the term as a LeadershipLostError (deleted or session)', async () => {
    const session = await a.session({ ttlSeconds: 10 });
    const leader = await a.campaign('reason-revoked', 'v', { session });
    await admin.leaseClient.leaseRevoke({ ID: session.leaseId.toString() });
    const reason = await waitFor(() => abortReason(leader.signal), { timeoutMs: 10_000 });
    expect(isLeadershipLostError(reason)).toBe(true);
    if (!isLeadershipLostError(reason)) return;
    // The key's delete event (the revoke removes the lease's keys) races the keepalive's "lease
    // gone", which is believed only after three answers on fresh streams: 'deleted' usually wins.
    console.log(`[election] revoked lease ended the term with reason '${reason.reason}'`);
    expect(['deleted', 'session']).toContain(reason.reason);
    await waitFor(() => session.isLost, { timeoutMs: 10_000, what: 'session lost too' });
    expect(isLeaseLostError(session.signal.reason) && session.signal.reason.reason).toBe('gone');
  });

  it('resigned: LeadershipResignedError, and onLost is not called', async () => {
    const leader = await a.campaign('reason-resigned', 'v');
    let lost = 0;
    leader.onLost(() => lost++);
    const signal = leader.signal;
    await leader.resign();
    expect(signal.aborted).toBe(true);
    expect(isLeadershipResignedError(signal.reason)).toBe(true);
    expect(isLeadershipLostError(signal.reason)).toBe(false);
    expect((signal.reason as LeaseholdError).code).toBe('LEADERSHIP_RESIGNED');
    expect(() => leader.throwIfLost()).toThrow(/was resigned/);
    // An event that would have been a loss arrives after the resign: still 'resigned'.
    await admin.put(leader.key).value('late');
    await admin.delete().key(leader.key);
    await a.leader('reason-resigned');
    expect(lost).toBe(0);
    expect(isLeadershipResignedError(leader.signal.reason)).toBe(true);
  });
});

describe('fenced writes of a leader', () => {
  it('put, delete and fencedWrite land while leader and are refused after the term is lost', async () => {
    const leader = await a.campaign('fenced', 'v');
    const key = `${dataPrefix}fenced/state`;
    const rev = await leader.put(key, 'one');
    expect((await rawKv(key))?.value.toString()).toBe('one');
    expect(BigInt((await rawKv(key))!.mod_revision)).toBe(rev);
    await leader.fencedWrite([
      { type: 'put', key, value: 'two' },
      { type: 'put', key: `${key}-bytes`, value: new Uint8Array([104, 105]) },
    ]);
    expect((await rawKv(key))?.value.toString()).toBe('two');
    expect((await rawKv(`${key}-bytes`))?.value.toString()).toBe('hi');
    await leader.delete(`${key}-bytes`);
    expect(await rawKv(`${key}-bytes`)).toBeUndefined();

    await admin.delete().key(leader.key);
    await waitFor(() => leader.signal.aborted, { timeoutMs: 5_000, what: 'term lost' });
    const refused = await leader.put(key, 'stale').catch((e: unknown) => e);
    expect(isLeadershipLostError(refused) && refused.reason).toBe('deleted');
    const refusedDelete = await leader.delete(key).catch((e: unknown) => e);
    expect(isLeadershipLostError(refusedDelete)).toBe(true);
    expect((await rawKv(key))?.value.toString()).toBe('two');
    await leader.resign();
  });

  it('a write racing an external delete is refused by etcd, not only by the signal', async () => {
    const leader = await a.campaign('fenced-race', 'v');
    const key = `${dataPrefix}fenced-race/state`;
    await admin.delete().key(leader.key);
    // Sent before the delete event can have arrived: the txn's compare refuses it.
    const refused = await leader.put(key, 'stale').catch((e: unknown) => e);
    expect(isLeadershipLostError(refused) && refused.reason).toBe('deleted');
    expect(await rawKv(key)).toBeUndefined();
    await leader.resign();
  });

  it('writes and proclaims after resign reject with LeadershipResignedError', async () => {
    const leader = await a.campaign('fenced-resigned', 'v');
    await leader.resign();
    const proclaimed = await leader.proclaim('after').catch((e: unknown) => e);
    expect(isLeadershipResignedError(proclaimed)).toBe(true);
    expect(await rawKv(leader.key)).toBeUndefined();
    const refused = await leader.put(`${dataPrefix}fenced-resigned`, 'x').catch((e: unknown) => e);
    expect(isLeadershipResignedError(refused)).toBe(true);
    expect(await rawKv(`${dataPrefix}fenced-resigned`)).toBeUndefined();
  });

  it('Symbol.asyncDispose resigns (await using)', async () => {
    let kept: Leadership | undefined;
    {
      await using leader = await a.campaign('dispose', 'v');
      kept = leader;
      expect(await keysOf('dispose')).toEqual([leader.key]);
    }
    expect(isLeadershipResignedError(kept.signal.reason)).toBe(true);
    expect(await keysOf('dispose')).toEqual([]);
    const again = await a.campaign('dispose', 'v');
    await again[Symbol.asyncDispose]();
    expect(isLeadershipResignedError(again.signal.reason)).toBe(true);
    expect(await a.leader('dispose')).toBeUndefined();
  });
});

describe('waiting candidates', () => {
  it('a candidate whose lease is revoked while waiting is never elected; the one behind it is', async () => {
    const holder = await b.campaign('revoked-waiter', 'holder');
    const doomedSession = await a.session({ ttlSeconds: 10 });
    const doomed = settled(a.campaign('revoked-waiter', 'doomed', { session: doomedSession }));
    await candidates('revoked-waiter', 2);
    const nextSession = await a.session({ ttlSeconds: 10 });
    const next = a.campaign('revoked-waiter', 'next', { session: nextSession });
    await candidates('revoked-waiter', 3);
    await admin.leaseClient.leaseRevoke({ ID: doomedSession.leaseId.toString() });
    const outcome = await waitFor(() => doomed, { timeoutMs: 10_000, what: 'doomed settles' });
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    const err = outcome.error;
    console.log(
      `[election] a waiter whose lease was revoked rejected with ${(err as Error).name}${isLeadershipLostError(err) ? ` '${err.reason}'` : ''}`,
    );
    expect(
      isLeaseLostError(err) || (isLeadershipLostError(err) && err.reason === 'expired-in-queue'),
    ).toBe(true);
    await holder.resign();
    const leader = await waitFor(() => next, { timeoutMs: 5_000, what: 'next elected' });
    expect(leader.value).toBe('next');
    expect(leader.token > holder.token).toBe(true);
    expect(await b.leader('revoked-waiter')).toMatchObject({ value: 'next', token: leader.token });
    await leader.resign();
    await nextSession.close();
    await doomedSession.close();
  });

  it('timeoutMs rejects with CampaignTimeoutError and withdraws the candidate key', async () => {
    const holder = await b.campaign('timeout', 'holder');
    const started = performance.now();
    const waiting = settled(a.campaign('timeout', 'late', { timeoutMs: 1_500 }));
    await candidates('timeout', 2); // the candidacy was in etcd before it timed out
    const outcome = await waitFor(() => waiting, { timeoutMs: 10_000, what: 'timeout' });
    const elapsed = performance.now() - started;
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(isCampaignTimeoutError(outcome.error)).toBe(true);
    if (!isCampaignTimeoutError(outcome.error)) return;
    expect(outcome.error.code).toBe('CAMPAIGN_TIMEOUT');
    expect(outcome.error.election).toBe('timeout');
    expect(outcome.error.timeoutMs).toBe(1_500);
    expect(elapsed).toBeGreaterThanOrEqual(1_490);
    await waitFor(async () => JSON.stringify(await keysOf('timeout')) === `["${holder.key}"]`, {
      timeoutMs: 5_000,
      what: 'candidate key withdrawn',
    });
    await holder.resign();
  });

  it('abort while waiting rejects with the signal reason and withdraws the candidate key', async () => {
    const holder = await b.campaign('abort', 'holder');
    const controller = new AbortController();
    const waiting = settled(a.campaign('abort', 'late', { signal: controller.signal }));
    await candidates('abort', 2);
    const reason = new Error('no longer needed');
    controller.abort(reason);
    const outcome = await waitFor(() => waiting, { timeoutMs: 2_000, what: 'abort' });
    expect(outcome.ok ? 'resolved' : outcome.error).toBe(reason);
    await waitFor(async () => JSON.stringify(await keysOf('abort')) === `["${holder.key}"]`, {
      timeoutMs: 5_000,
      what: 'candidate key withdrawn',
    });
    await holder.resign();
  });

  it('two campaigns on one session are queued locally; the second is elected after the first resigns, with a higher token', async () => {
    const session = await a.session({ ttlSeconds: 10 });
    const first = await a.campaign('local', 'first', { session });
    const second = a.campaign('local', 'second', { session });
    expect(await stillPending(second, 500)).toBe(true);
    expect(await keysOf('local')).toEqual([first.key]); // one key per lease: the second has none yet
    expect((await rawKv(first.key))?.value.toString()).toBe('first');
    await first.resign();
    const leader = await waitFor(() => second, { timeoutMs: 5_000, what: 'second elected' });
    expect(leader.key).toBe(first.key);
    expect(leader.token > first.token).toBe(true);
    expect(leader.value).toBe('second');
    // The first term's delete event (same key, older revision) must not end the second term: a
    // fenced write lands, and its event comes after that delete.
    await leader.put(`${dataPrefix}local`, 'second');
    await a.leader('local');
    expect(leader.isLeader).toBe(true);
    expect(await a.leader('local')).toMatchObject({ value: 'second', token: leader.token });
    await leader.resign();
    await session.close();
  });

  it('a campaign aborted while queued locally behind its own session leaves the next one in line unharmed', async () => {
    const session = await a.session({ ttlSeconds: 10 });
    const first = await a.campaign('local-abort', 'first', { session });
    const controller = new AbortController();
    const aborted = settled(
      a.campaign('local-abort', 'aborted', { session, signal: controller.signal }),
    );
    const timedOut = settled(a.campaign('local-abort', 'timed out', { session, timeoutMs: 300 }));
    const third = a.campaign('local-abort', 'third', { session });
    const reason = new Error('changed my mind');
    controller.abort(reason);
    const abortOutcome = await waitFor(() => aborted, { timeoutMs: 2_000, what: 'abort' });
    expect(abortOutcome.ok ? 'resolved' : abortOutcome.error).toBe(reason);
    const timeoutOutcome = await waitFor(() => timedOut, { timeoutMs: 5_000, what: 'timeout' });
    expect(!timeoutOutcome.ok && isCampaignTimeoutError(timeoutOutcome.error)).toBe(true);
    expect(await keysOf('local-abort')).toEqual([first.key]);
    expect((await rawKv(first.key))?.value.toString()).toBe('first');
    await first.resign();
    const leader = await waitFor(() => third, { timeoutMs: 5_000, what: 'third elected' });
    expect(leader.value).toBe('third');
    expect(leader.token > first.token).toBe(true);
    expect((await a.leader('local-abort'))?.value).toBe('third');
    await leader.resign();
    await session.close();
  });
});

describe('lead()', () => {
  interface Term {
    token: bigint;
    key: string;
    startedAt: number;
    reason?: unknown;
  }

  /** Work that records its term and returns once its signal aborts. */
  const recorder = (terms: Term[]) => async (ctx: LeaderContext) => {
    const term: Term = { token: ctx.token, key: ctx.leadership.key, startedAt: performance.now() };
    terms.push(term);
    expect(ctx.leadership.token).toBe(ctx.token);
    expect(ctx.leadership.isLeader).toBe(true);
    term.reason = await abortReason(ctx.signal);
  };

  it('runs the work with the token; a loss aborts its signal and lead campaigns again with a higher token; shutdown resigns', async () => {
    const terms: Term[] = [];
    const elected: bigint[] = [];
    const lost: LeaseholdError[] = [];
    const controller = new AbortController();
    const leading = settled(
      a.lead('lead-basic', 'me', recorder(terms), {
        signal: controller.signal,
        onElected: (l) => elected.push(l.token),
        onLost: (e) => lost.push(e),
      }),
    );
    await waitFor(() => terms.length === 1, { timeoutMs: 10_000, what: 'first term' });
    const first = terms[0]!;
    expect(await a.leader('lead-basic')).toMatchObject({ value: 'me', token: first.token });
    await admin.delete().key(first.key);
    await waitFor(() => terms.length === 2, { timeoutMs: 10_000, what: 'second term' });
    expect(isLeadershipLostError(first.reason) && first.reason.reason).toBe('deleted');
    expect(lost).toEqual([first.reason]);
    const second = terms[1]!;
    expect(second.token > first.token).toBe(true);
    expect(elected).toEqual([first.token, second.token]);
    expect(await a.leader('lead-basic')).toMatchObject({ value: 'me', token: second.token });

    const shutdown = new Error('shutting down');
    controller.abort(shutdown);
    const outcome = await waitFor(() => leading, { timeoutMs: 10_000, what: 'lead resolves' });
    expect(outcome).toEqual({ ok: true, value: undefined });
    expect(second.reason).toBe(shutdown);
    expect(await keysOf('lead-basic')).toEqual([]);
  });

  it('shutdown while still campaigning stops the campaign: lead resolves, the work never runs, the key is withdrawn', async () => {
    const holder = await b.campaign('lead-waiting', 'holder');
    const controller = new AbortController();
    let ran = false;
    const leading = settled(
      a.lead('lead-waiting', 'me', () => void (ran = true), { signal: controller.signal }),
    );
    await candidates('lead-waiting', 2);
    controller.abort(new Error('shutting down'));
    const outcome = await waitFor(() => leading, { timeoutMs: 5_000, what: 'lead resolves' });
    expect(outcome).toEqual({ ok: true, value: undefined });
    expect(ran).toBe(false);
    await waitFor(
      async () => JSON.stringify(await keysOf('lead-waiting')) === `["${holder.key}"]`,
      { timeoutMs: 5_000, what: 'candidate key withdrawn' },
    );
    await holder.resign();
  });

  it("campaigns again on a fresh lease after the shared session's lease is revoked by someone else", async () => {
    // Its own client: the shared session of this one is the one that gets revoked.
    await using client = await connect({
      endpoints,
      electionPrefix,
      lockPrefix: uniquePrefix('x'),
    });
    const terms: (Term & { leaseId: bigint })[] = [];
    const failures: LeaseholdError[] = [];
    const controller = new AbortController();
    const leading = settled(
      client.lead(
        'lead-revoked',
        'me',
        async (ctx) => {
          const term = {
            token: ctx.token,
            key: ctx.leadership.key,
            startedAt: performance.now(),
            leaseId: ctx.leadership.session.leaseId,
          };
          terms.push(term);
          await abortReason(ctx.signal);
        },
        { signal: controller.signal, onLost: (e) => failures.push(e) },
      ),
    );
    await waitFor(() => terms.length === 1, { timeoutMs: 10_000, what: 'first term' });
    await admin.leaseClient.leaseRevoke({ ID: terms[0]!.leaseId.toString() });
    const second = await Promise.race([
      waitFor(() => terms[1], { timeoutMs: 20_000, what: 'a term on a fresh lease' }),
      leading.then((outcome) => {
        throw new Error(
          `lead settled instead of campaigning again: ${outcome.ok ? 'resolved' : `${(outcome.error as Error).name}: ${(outcome.error as Error).message}`}`,
        );
      }),
    ]);
    console.log(
      `[election] after the revoke, lead reported: ${failures.map((e) => `${e.name}${'reason' in e ? ` (${String(e.reason)})` : ''}`).join(', ')}`,
    );
    expect(second.leaseId).not.toBe(terms[0]!.leaseId);
    expect(second.token > terms[0]!.token).toBe(true);
    expect(await client.leader('lead-revoked')).toMatchObject({ token: second.token });
    controller.abort();
    expect(await waitFor(() => leading, { timeoutMs: 10_000, what: 'lead resolves' })).toEqual({
      ok: true,
      value: undefined,
    });
    expect(await keysOf('lead-revoked')).toEqual([]);
  });

  it('a given session that is lost ends lead with the loss: it does not campaign on another lease', async () => {
    const session = await a.session({ ttlSeconds: 10 });
    const terms: Term[] = [];
    const leading = settled(a.lead('lead-session', 'me', recorder(terms), { session }));
    await waitFor(() => terms.length === 1, { timeoutMs: 10_000, what: 'elected' });
    await session.close();
    const outcome = await waitFor(() => leading, { timeoutMs: 10_000, what: 'lead rejects' });
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(isLeadershipLostError(outcome.error) && outcome.error.reason).toBe('session');
    expect(terms).toHaveLength(1);
    expect(await keysOf('lead-session')).toEqual([]);
  });

  it('recampaign: false makes lead reject with the loss', async () => {
    const terms: Term[] = [];
    const leading = settled(a.lead('lead-once', 'me', recorder(terms), { recampaign: false }));
    await waitFor(() => terms.length === 1, { timeoutMs: 10_000, what: 'elected' });
    await admin.delete().key(terms[0]!.key);
    const outcome = await waitFor(() => leading, { timeoutMs: 10_000, what: 'lead rejects' });
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(isLeadershipLostError(outcome.error) && outcome.error.reason).toBe('deleted');
    expect(outcome.error).toBe(terms[0]!.reason);
    expect(terms).toHaveLength(1);
    expect(await keysOf('lead-once')).toEqual([]);
  });

  it('work returning resigns and lead resolves', async () => {
    let seen: { token: bigint; leadership: Leadership } | undefined;
    await a.lead('lead-return', 'me', ({ token, leadership }) => {
      seen = { token, leadership };
    });
    expect(seen).toBeDefined();
    expect(isLeadershipResignedError(seen!.leadership.signal.reason)).toBe(true);
    expect(await keysOf('lead-return')).toEqual([]);
  });

  it('work throwing makes lead reject with that error, and the key is gone', async () => {
    const failure = new Error('leader job failed');
    let key: string | undefined;
    const outcome = await settled(
      a.lead('lead-throw', 'me', async ({ leadership }) => {
        key = leadership.key;
        throw failure;
      }),
    );
    expect(outcome.ok ? 'resolved' : outcome.error).toBe(failure);
    expect(key).toBeDefined();
    expect(await rawKv(key!)).toBeUndefined();
    expect(await a.leader('lead-throw')).toBeUndefined();
  });

  it('after a loss, waits for a work that ignores its signal before the next term; on shutdown, drainTimeoutMs bounds it', async () => {
    const drainTimeoutMs = 700;
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => {
      if (w.code === 'LEASEHOLD_DRAIN_TIMEOUT') warnings.push(w.message);
    };
    process.on('warning', onWarning);
    const releases: (() => void)[] = [];
    const terms: Term[] = [];
    const controller = new AbortController();
    try {
      const leading = settled(
        a.lead(
          'lead-drain',
          'me',
          async (ctx) => {
            terms.push({ token: ctx.token, key: ctx.leadership.key, startedAt: performance.now() });
            await new Promise<void>((resolve) => releases.push(resolve)); // ignores ctx.signal
          },
          { signal: controller.signal, drainTimeoutMs },
        ),
      );
      await waitFor(() => terms.length === 1, { timeoutMs: 10_000, what: 'first term' });
      await admin.delete().key(terms[0]!.key);
      await waitFor(() => warnings.length === 1, { timeoutMs: 10_000, what: 'drain warning' });
      expect(warnings[0]).toMatch(/drainTimeoutMs \(700 ms\).*waiting for it to return/);
      // One process never runs two terms' work at once: no new term while the old work runs.
      expect(terms).toHaveLength(1);
      const releasedAt = performance.now();
      releases[0]!();
      await waitFor(() => terms.length === 2, { timeoutMs: 10_000, what: 'second term' });
      expect(terms[1]!.startedAt).toBeGreaterThanOrEqual(releasedAt);
      expect(terms[1]!.token).toBeGreaterThan(terms[0]!.token);

      const shutdownAt = performance.now();
      controller.abort(new Error('shutdown'));
      const outcome = await waitFor(() => leading, { timeoutMs: 10_000, what: 'lead resolves' });
      const shutdownTook = performance.now() - shutdownAt;
      console.log(
        `[election] drain ${drainTimeoutMs} ms: resolved ${shutdownTook.toFixed(0)} ms after shutdown`,
      );
      expect(outcome.ok).toBe(true);
      expect(shutdownTook).toBeGreaterThanOrEqual(drainTimeoutMs - 5);
      expect(shutdownTook).toBeLessThan(drainTimeoutMs + 2_000);
      expect(await keysOf('lead-drain')).toEqual([]);
      await waitFor(() => warnings.length >= 2, { timeoutMs: 1_000, what: 'shutdown warning' });
      expect(warnings[1]).toMatch(/resigning without it/);
    } finally {
      for (const release of releases) release();
      process.off('warning', onWarning);
      controller.abort();
    }
  });
});
