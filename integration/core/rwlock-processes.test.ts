/**
 * Read/write locks between real processes, against the run's etcd. Writers write through
 * @leasehold/fence to PostgreSQL (resource: the lock's name, the writer's token); readers only
 * hold. Exclusion is checked by the holders' counts in PostgreSQL (see holders.ts): a writer
 * counts itself in alone, readers count themselves in beside other readers.
 */
import { defaults } from '@leasehold/core';
import { expect, it } from 'vitest';
import { waitFor } from '../setup/etcd.js';
import type { Msg } from '../setup/worker-process.js';
import { describeWith, findPostgres } from '../fence/stores.js';
import { holderSuite, type Occupancy } from './holders.js';

const postgres = await findPostgres();

/** What a hold counted on its resource as it counted itself in. */
const occupancy = (h: Msg) => h.occupancy as Occupancy;

describeWith(postgres, 'read/write locks between processes', (url) => {
  const { lockPrefix, worker, logOf, keysOf } = holderSuite(url, 'rwlock');

  it('readers share, a writer excludes everyone: 12 contenders in 4 processes, one writer in three', async () => {
    const prefix = lockPrefix('rw-contend');
    const name = 'catalog';
    const rounds = 12;
    const procs = await Promise.all(['p0', 'p1', 'p2', 'p3'].map((n) => worker(n, prefix, 10)));
    await Promise.all(
      procs.map((p) =>
        p.request(
          'contend',
          { modes: ['read', 'read', 'write'], name, contenders: 3, rounds, holdMs: 20 },
          120_000,
        ),
      ),
    );
    const holds = procs.flatMap((p) => p.all('held'));
    const writes = holds.filter((h) => h.mode === 'write');
    const reads = holds.filter((h) => h.mode === 'read');
    const readersAtOnce = Math.max(...reads.map((h) => occupancy(h).readers));
    const crowdedWrites = writes.filter((w) => occupancy(w).readers + occupancy(w).writers > 1);
    console.log(
      `[rwlock] ${holds.length} holds (${writes.length} writes, ${reads.length} reads) by 12 contenders in 4 processes: up to ${readersAtOnce} readers at once; writers that found company: ${crowdedWrites.length}`,
    );
    expect(holds).toHaveLength(4 * 3 * rounds);
    // A hold lost on the way is a failure of its own, not company found.
    for (const h of holds) expect(h).toMatchObject({ heldThroughout: true, written: true });
    for (const w of writes) {
      expect(occupancy(w), `others in during ${w.key as string}`).toEqual({
        readers: 0,
        writers: 1,
      });
    }
    for (const r of reads)
      expect(occupancy(r).writers, `a writer in with ${r.key as string}`).toBe(0);
    expect(readersAtOnce).toBeGreaterThan(1);
    // The writers' fenced writes, in PostgreSQL's commit order, carry growing tokens.
    const tokens = (await logOf(new RegExp(`^${name}$`))).map((r) => r.token);
    expect(tokens).toHaveLength(writes.length);
    expect(tokens).toEqual([...tokens].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    for (const p of procs) expect((await p.endInput()).code).toBe(0);
    expect(await keysOf(`${prefix}${name}%rw/`)).toEqual([]);
  }, 180_000);

  it('a writer queued behind readers is not starved by readers that come after it', async () => {
    const prefix = lockPrefix('rw-starve');
    const name = 'starve';
    const range = `${prefix}${name}%rw/`;
    const a = await worker('a', prefix, 10);
    const b = await worker('b', prefix, 10);
    const c = await worker('c', prefix, 10);
    await a.request('acquire', { id: 'r1', mode: 'read', name });
    await c.request('acquire', { id: 'r2', mode: 'read', name }); // readers share
    const writer = b.request('acquire', { id: 'w', mode: 'write', name });
    void writer.catch(() => undefined);
    await waitFor(async () => (await keysOf(range)).length === 3, { what: 'the writer queued' });
    // Readers keep coming while the readers before the writer still read: each queues behind it.
    const later = [a, c, a, c].map((p, i) =>
      p.request('acquire', { id: `late${i}`, mode: 'read', name }),
    );
    for (const l of later) void l.catch(() => undefined);
    await waitFor(async () => (await keysOf(range)).length === 7, { what: 'later readers queued' });
    await a.request('release', { id: 'r1' });
    const releasedAt = (await c.request('release', { id: 'r2' })).calledAt as number;
    const w = await writer;
    expect(w.at as number).toBeGreaterThan(releasedAt);
    const written = await b.request('write', { id: 'w', note: 'writer' });
    expect(written).toMatchObject({ ok: true });
    const writerDone = (await b.request('release', { id: 'w' })).calledAt as number;
    // None of the later readers got in before the writer was done.
    const admitted = await Promise.all(later);
    for (const l of admitted) expect(l.at as number).toBeGreaterThan(writerDone);
    console.log(
      `[rwlock starve] the writer got in ${((w.at as number) - releasedAt).toFixed(0)} ms after the last earlier reader's release; 4 later readers ${(Math.min(...admitted.map((l) => l.at as number)) - writerDone).toFixed(0)} ms after the writer's`,
    );
    for (const p of [a, b, c]) expect((await p.endInput()).code).toBe(0);
  }, 60_000);

  it('SIGSTOP of a writer past its TTL: the next holder gets in; after SIGCONT the old writer sees the loss first and its fenced write is refused', async () => {
    const ttl = 2;
    const prefix = lockPrefix('rw-sigstop');
    const name = 'sigstop';
    const a = await worker('a', prefix, ttl);
    const b = await worker('b', prefix, 10);
    const heldA = await a.request('acquire', { id: 'a', mode: 'write', name });
    await a.request('loop', { id: 'a', intervalMs: 100, writeAnyway: true });
    await a.event((m) => m.event === 'tick' && m.ok === true, 'a writes');
    const waiting = b.request('acquire', { id: 'b', mode: 'write', name });
    void waiting.catch(() => undefined);
    await waitFor(async () => (await keysOf(`${prefix}${name}%rw/`)).length === 2, {
      what: 'b queued',
    });
    const stoppedAt = a.kill('SIGSTOP');
    const heldB = await waiting;
    const takenMs = (heldB.at as number) - stoppedAt;
    expect(await b.request('write', { id: 'b', note: 'next writer' })).toMatchObject({ ok: true });
    a.kill('SIGCONT');
    console.log(
      `[rwlock sigstop] b got the write lock ${takenMs.toFixed(0)} ms into a's pause (TTL ${ttl * 1000} ms)`,
    );
    expect(BigInt(heldB.token as string)).toBeGreaterThan(BigInt(heldA.token as string));
    // The lease outlives its last keepalive by at most the TTL; etcd deletes its keys on its
    // next expiry check (every 500 ms).
    expect(takenMs).toBeLessThanOrEqual(ttl * 1000 + 1_000 + defaults.callTimeoutMs);
    const late = await a.event((m) => m.event === 'late-write', 'a writes with its old token');
    const ticks = a.all('tick');
    expect(ticks.filter((m) => m.aborted === false && (m.at as number) > stoppedAt)).toEqual([]);
    expect(ticks.at(-1)).toMatchObject({ aborted: true, error: 'LockLostError' });
    expect(late).toMatchObject({ ok: false, stale: true, highest: heldB.token });
    const log = await logOf(new RegExp(`^${name}$`));
    const firstOfB = log.findIndex((r) => r.worker === 'b');
    expect(firstOfB).toBeGreaterThan(0);
    expect(log.slice(firstOfB).every((r) => r.worker === 'b')).toBe(true);
    for (const p of [a, b]) expect((await p.endInput()).code).toBe(0);
  }, 60_000);
});
