/**
 * Semaphores between real processes, against the run's etcd. Holders write through
 * @leasehold/fence to PostgreSQL, fenced per slot (resource `${name}#${slot}`, the permit's
 * token). What the processes did is checked against etcd's own history (every permit key and slot
 * record at every revision, from a watch) and against PostgreSQL's log.
 *
 * Workers report times as wall-clock ms (performance.timeOrigin + performance.now()); this file
 * reads the same clock, so times from different processes compare.
 */
import { defaults } from '@leasehold/core';
import { expect, it } from 'vitest';
import { waitFor } from '../setup/etcd.js';
import { currentRevision, recordHistory, type HistoryEvent } from '../setup/history.js';
import type { Msg } from '../setup/worker-process.js';
import { describeWith, findPostgres } from '../fence/stores.js';
import { holderSuite, now, type Occupancy } from './holders.js';

/**
 * What etcd's history says about a semaphore: replays every permit key and slot record, revision
 * by revision. A claim is a slot record's put; at its revision the claimant must be live, among
 * the `permits` oldest keys (admitted in its turn), and the slot's previous owner gone with a
 * lower token. Holders at a revision are the live keys with a claimed slot.
 */
function replayPermits(
  events: readonly HistoryEvent[],
  ranges: { queue: string; slots: string },
  permits: number,
) {
  const live = new Map<string, bigint>();
  const records = new Map<number, { key: string; token: bigint }>();
  const slotOf = new Map<string, number>();
  const claims: { slot: number; key: string; token: bigint; revision: bigint }[] = [];
  const problems: string[] = [];
  let maxHolders = 0;
  for (let i = 0; i < events.length;) {
    const revision = events[i]!.revision;
    for (; i < events.length && events[i]!.revision === revision; i++) {
      const e = events[i]!;
      if (e.key.startsWith(ranges.queue)) {
        if (e.kind === 'delete') {
          live.delete(e.key);
          slotOf.delete(e.key);
        } else if (e.create === e.revision) {
          live.set(e.key, e.create);
        }
        continue;
      }
      if (!e.key.startsWith(ranges.slots)) continue;
      const slot = Number(e.key.slice(ranges.slots.length));
      if (e.kind === 'delete') {
        if (live.size > 0) problems.push(`rev ${revision}: slot ${slot} removed while keys live`);
        records.delete(slot);
        continue;
      }
      const owner = JSON.parse(e.value) as { key: string; token: string };
      const token = BigInt(owner.token);
      const rank = [...live.values()].filter((t) => t < token).length;
      const before = records.get(slot);
      if (live.get(owner.key) !== token) problems.push(`rev ${revision}: ${owner.key} not live`);
      if (rank >= permits) problems.push(`rev ${revision}: ${owner.key} claimed at rank ${rank}`);
      if (slot >= permits) problems.push(`rev ${revision}: slot ${slot} ≥ permits`);
      if (before && live.get(before.key) === before.token) {
        problems.push(`rev ${revision}: slot ${slot} taken from live ${before.key}`);
      }
      if (before && before.token >= token) {
        problems.push(`rev ${revision}: slot ${slot} token ${token} after ${before.token}`);
      }
      records.set(slot, { key: owner.key, token });
      slotOf.set(owner.key, slot);
      claims.push({ slot, key: owner.key, token, revision });
    }
    const held = [...slotOf.keys()].filter((key) => live.has(key));
    const slots = new Set(held.map((key) => slotOf.get(key)));
    if (slots.size !== held.length) problems.push(`rev ${revision}: two holders share a slot`);
    maxHolders = Math.max(maxHolders, held.length);
  }
  return { claims, problems, maxHolders };
}

const postgres = await findPostgres();

describeWith(postgres, 'semaphores between processes', (url) => {
  const { admin, lockPrefix, worker, logOf, keysOf } = holderSuite(url, 'semaphore');

  it('3 permits, 12 contenders in 4 processes: never more than 3 holders, each admitted among the 3 oldest keys, one slot each, every slot’s tokens strictly increase', async () => {
    const permits = 3;
    const rounds = 15;
    const prefix = lockPrefix('sem-contend');
    const name = 'payments';
    const ranges = { queue: `${prefix}${name}%sem/`, slots: `${prefix}${name}%slot/` };
    const history = await recordHistory(
      admin,
      `${prefix}${name}%`,
      await currentRevision(admin, prefix),
    );
    const procs = await Promise.all(['p0', 'p1', 'p2', 'p3'].map((n) => worker(n, prefix, 10)));
    const startedAt = now();
    await Promise.all(
      procs.map((p) =>
        p.request(
          'contend',
          { mode: 'permit', name, permits, contenders: 3, rounds, holdMs: 20 },
          120_000,
        ),
      ),
    );
    const ranMs = now() - startedAt;
    const events = await history.close(`${prefix}${name}%end`);
    const holds = procs.flatMap((p) => p.all('held'));
    const replay = replayPermits(events, ranges, permits);
    const overlap = Math.max(...holds.map((h) => (h.occupancy as Occupancy).writers));
    console.log(
      `[semaphore] ${holds.length} holds by 12 contenders in 4 processes in ${ranMs.toFixed(0)} ms: at most ${replay.maxHolders} holders in etcd's history (${events.length} events), at most ${overlap} by the holders' own counts in PostgreSQL; ${replay.claims.length} slot claims`,
    );
    expect(holds).toHaveLength(4 * 3 * rounds);
    expect(replay.problems).toEqual([]);
    expect(replay.maxHolders).toBeLessThanOrEqual(permits);
    expect(replay.maxHolders).toBe(permits); // the test did contend
    expect(overlap).toBeLessThanOrEqual(permits);
    expect(overlap).toBeGreaterThan(1); // the counts did see holders side by side
    // Each hold was one claim of etcd's history, with the slot the process was given.
    const claimOf = new Map(replay.claims.map((c) => [c.token.toString(), c]));
    for (const h of holds) {
      expect(claimOf.get(h.token as string), `claim of ${h.key as string}`).toMatchObject({
        slot: h.slot,
        key: h.key,
      });
      expect(h).toMatchObject({ heldThroughout: true, written: true });
    }
    // Per slot, in etcd's order, tokens grow; PostgreSQL accepted them in that order too.
    const log = await logOf(new RegExp(`^${name}#`));
    expect(new Set(log.map((r) => r.resource))).toEqual(
      new Set(Array.from({ length: permits }, (_, s) => `${name}#${s}`)),
    );
    for (let s = 0; s < permits; s++) {
      const tokens = log.filter((r) => r.resource === `${name}#${s}`).map((r) => r.token);
      expect(tokens).toEqual([...tokens].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      const claimed = replay.claims.filter((c) => c.slot === s).map((c) => c.token);
      expect(tokens).toEqual(claimed);
    }
    for (const p of procs) expect((await p.endInput()).code).toBe(0);
    expect(await keysOf(ranges.queue)).toEqual([]);
  }, 180_000);

  it('SIGSTOP of a holder past its TTL: its slot goes to the next waiter; after SIGCONT its first read sees the loss and its fenced write to its slot is refused', async () => {
    const ttl = 2;
    const prefix = lockPrefix('sem-sigstop');
    const name = 'reports';
    const args = { mode: 'permit', name, permits: 2 };
    const a = await worker('a', prefix, ttl);
    const b = await worker('b', prefix, 10);
    const c = await worker('c', prefix, 10);
    const heldA = await a.request('acquire', { id: 'a', ...args });
    await a.request('loop', { id: 'a', intervalMs: 100, writeAnyway: true });
    await a.event((m) => m.event === 'tick' && m.ok === true, 'a writes to its slot');
    const heldB = await b.request('acquire', { id: 'b', ...args });
    const waiting = c.request('acquire', { id: 'c', ...args });
    void waiting.catch(() => undefined); // awaited below
    await waitFor(async () => (await keysOf(`${prefix}${name}%sem/`)).length === 3, {
      what: 'c queued behind a and b',
    });

    const stoppedAt = a.kill('SIGSTOP');
    const heldC: Msg = await waiting;
    const takenMs = (heldC.at as number) - stoppedAt;
    const written = await c.request('write', { id: 'c', note: 'next holder' });
    const resumedAt = a.kill('SIGCONT');
    console.log(
      `[semaphore sigstop] a (slot ${heldA.slot as number}) paused ${(resumedAt - stoppedAt).toFixed(0)} ms; c took slot ${heldC.slot as number} ${takenMs.toFixed(0)} ms into the pause (TTL ${ttl * 1000} ms)`,
    );
    expect(heldC.slot).toBe(heldA.slot);
    expect(heldB.slot).not.toBe(heldA.slot);
    expect(BigInt(heldC.token as string)).toBeGreaterThan(BigInt(heldA.token as string));
    expect(written).toMatchObject({ ok: true, abortedBefore: false });
    // The lease outlives its last keepalive by at most the TTL; etcd then deletes its keys on
    // its next expiry check (every 500 ms), and c's claim is a call or two.
    expect(takenMs).toBeLessThanOrEqual(ttl * 1000 + 1_000 + defaults.callTimeoutMs);

    const late = await a.event((m) => m.event === 'late-write', 'a writes with its old token');
    const ticks = a.all('tick');
    expect(ticks.filter((m) => m.aborted === false && (m.at as number) > stoppedAt)).toEqual([]);
    expect(ticks.at(-1)).toMatchObject({ aborted: true, error: 'LockLostError' });
    expect(late).toMatchObject({ ok: false, stale: true, highest: heldC.token });
    expect(await a.event((m) => m.event === 'lost', 'a lost')).toMatchObject({
      error: 'LockLostError',
    });
    // b never noticed: its hold and its slot are its own.
    expect(await b.request('write', { id: 'b' })).toMatchObject({ ok: true, abortedBefore: false });
    const slotLog = (await logOf(new RegExp(`^${name}#`))).filter(
      (r) => r.resource === `${name}#${heldA.slot as number}`,
    );
    const firstOfC = slotLog.findIndex((r) => r.worker === 'c');
    expect(firstOfC).toBeGreaterThan(0);
    expect(slotLog.slice(firstOfC).every((r) => r.worker === 'c')).toBe(true);
    for (const p of [a, b, c]) expect((await p.endInput()).code).toBe(0);
  }, 60_000);

  it('SIGSTOP of a waiter that etcd admits while it is frozen, past its TTL: after SIGCONT it never reports the permit held; the next waiter gets the slot', async () => {
    const ttl = 2;
    const prefix = lockPrefix('sem-sigstop-waiter');
    const name = 'frozen';
    const range = `${prefix}${name}%sem/`;
    const args = { mode: 'permit', name, permits: 1 };
    const h = await worker('h', prefix, 10);
    const a = await worker('a', prefix, ttl);
    const c = await worker('c', prefix, 10);
    const heldH = await h.request('acquire', { id: 'h', ...args });
    // c is granted within the bound of the holder test's; a's acquire then settles on its first look.
    const grantMs = ttl * 1000 + 1_000 + defaults.callTimeoutMs;
    const frozen = a.request('acquire', { id: 'a', ...args }, 2 * grantMs + defaults.callTimeoutMs);
    void frozen.catch(() => undefined); // awaited below
    await waitFor(async () => (await keysOf(range)).length === 2, { what: 'a queued' });
    const next = c.request('acquire', { id: 'c', ...args });
    void next.catch(() => undefined);
    await waitFor(async () => (await keysOf(range)).length === 3, { what: 'c queued' });
    const stoppedAt = a.kill('SIGSTOP');
    // In etcd's view a holds now (the oldest key), but cannot claim; then its lease expires.
    await h.request('release', { id: 'h' });
    const heldC: Msg = await next;
    const resumedAt = a.kill('SIGCONT');
    const outcome = await frozen.then(
      (m) => ({ held: true, ...m }),
      (err: unknown) => ({ held: false, error: String(err) }),
    );
    console.log(
      `[semaphore sigstop waiter] a paused ${(resumedAt - stoppedAt).toFixed(0)} ms (TTL ${ttl * 1000} ms); c took slot ${heldC.slot as number} ${((heldC.at as number) - stoppedAt).toFixed(0)} ms into it; a's acquire: ${JSON.stringify(outcome)}`,
    );
    expect(outcome.held).toBe(false);
    expect((heldC.at as number) - stoppedAt).toBeLessThanOrEqual(grantMs);
    expect(heldC.slot).toBe(heldH.slot);
    expect(BigInt(heldC.token as string)).toBeGreaterThan(BigInt(heldH.token as string));
    expect(await c.request('write', { id: 'c' })).toMatchObject({ ok: true, abortedBefore: false });
    expect(await keysOf(range)).toEqual([heldC.key]);
    for (const p of [h, a, c]) expect((await p.endInput()).code).toBe(0);
  }, 60_000);
});
