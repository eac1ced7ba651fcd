/**
 * The behaviour users' tests rely on, written once and run against two worlds: the in-memory
 * etcd of `@leasehold/testing` (memory.test.ts) and the real etcd of the integration run
 * (etcd.test.ts). A case that passes on one and fails on the other is a difference between the
 * memory etcd and etcd, and a bug in the memory etcd.
 *
 * Time is the world's: `within` lets up to a budget of it pass while waiting for an event (the
 * memory clock advances; real time passes). Budgets come from what the event depends on: a
 * handoff is one watch event, at most one call's deadline away; a loss is at most a TTL away.
 */
import {
  LockTakenError,
  defaults,
  type Leasehold,
  type LeaderState,
  type Lock,
} from '@leasehold/core';
import { describe, expect, it } from 'vitest';

export interface World {
  /** A client of its own (another process) on the world's etcd, with these key prefixes. */
  client(prefixes: { lockPrefix: string; electionPrefix: string }): Promise<Leasehold>;
  /** The keys under `prefix` now, with their create revisions. */
  keys(prefix: string): Promise<{ key: string; createRevision: bigint }[]>;
  /**
   * etcd ends `leaseId` as it does when its holder dies: memory pauses the holder's process past
   * the lease's TTL, so it expires; the real world revokes it. Resolves once etcd no longer has it.
   */
  killHolder(client: Leasehold, leaseId: bigint, ttlSeconds: number): Promise<void>;
  /** `promise`'s outcome, letting up to `budgetMs` of the world's time pass; throws after that. */
  within<T>(promise: Promise<T>, budgetMs: number, what: string): Promise<T>;
  /** Resolves once `check()` is true, letting up to `budgetMs` of the world's time pass. */
  until(check: () => Promise<boolean>, budgetMs: number, what: string): Promise<void>;
  /** Revokes `leaseId` as another tool would (`etcdctl lease revoke`). */
  revokeLease(leaseId: bigint): Promise<void>;
  /** Deletes `key` as another tool would (`etcdctl del`). */
  deleteKey(key: string): Promise<void>;
  /** A unique prefix for one test's keys. */
  prefix(label: string): string;
}

/**
 * A handoff is one watch event: it must arrive well before the client's periodic re-read of its
 * prefix (`recheckIntervalMs`), or the watch is broken and only the re-read found it.
 */
const HANDOFF_MS = defaults.recheckIntervalMs / 2;
/** The shortest TTL etcd grants with default timing: losses come quickly. */
const TTL_SECONDS = 2;

export function describeBehaviour(name: string, world: () => World): void {
  describe(`behaviour (${name})`, () => {
    const setUp = async (label: string, count: number) => {
      const w = world();
      const base = w.prefix(label);
      const prefixes = { lockPrefix: `${base}lock/`, electionPrefix: `${base}election/` };
      const clients = await Promise.all(Array.from({ length: count }, () => w.client(prefixes)));
      const close = () => Promise.all(clients.map((c) => c.close()));
      return { w, clients, prefixes, base, close };
    };
    /** Resolves once `count` keys are queued under `prefix` (a waiter has joined). */
    const queued = (w: World, prefix: string, count: number) =>
      w.until(
        async () => (await w.keys(prefix)).length >= count,
        HANDOFF_MS,
        `${count} keys under ${prefix}`,
      );

    it('acquire, holder, release; tryAcquire names the holder', async () => {
      const { clients, close } = await setUp('basic', 2);
      const [a, b] = clients as [Leasehold, Leasehold];
      try {
        const lock = await a.acquire('job', { value: 'worker-a' });
        expect(lock.isHeld).toBe(true);
        const holder = await b.holder('job');
        expect(holder).toMatchObject({ value: 'worker-a', token: lock.token, key: lock.key });
        const taken = await b.tryAcquire('job').catch((err: unknown) => err);
        expect(taken).toBeInstanceOf(LockTakenError);
        expect(taken).toMatchObject({ holderToken: lock.token, holderValue: 'worker-a' });
        await lock.release();
        expect(lock.isHeld).toBe(false);
        expect(await b.holder('job')).toBeUndefined();
        const second = await b.tryAcquire('job');
        expect(second.token).toBeGreaterThan(lock.token);
        await second.release();
      } finally {
        await close();
      }
    });

    it('the token is the key create revision and grows with every acquisition', async () => {
      const { w, clients, prefixes, close } = await setUp('token', 1);
      const [a] = clients as [Leasehold];
      try {
        const tokens: bigint[] = [];
        for (let i = 0; i < 3; i++) {
          const lock = await a.acquire('job');
          const [own] = await w.keys(prefixes.lockPrefix);
          expect(own).toEqual({ key: lock.key, createRevision: lock.token });
          tokens.push(lock.token);
          await lock.release();
        }
        expect(tokens[1]).toBeGreaterThan(tokens[0]!);
        expect(tokens[2]).toBeGreaterThan(tokens[1]!);
      } finally {
        await close();
      }
    });

    it('one holder at a time, handed over in the order waiters joined', async () => {
      const { w, clients, prefixes, close } = await setUp('fifo', 3);
      const [a, b, c] = clients as [Leasehold, Leasehold, Leasehold];
      try {
        const order: string[] = [];
        const first = await a.acquire('job');
        const bWaits = b.acquire('job').then((l) => (order.push('b acquired'), l));
        await queued(w, prefixes.lockPrefix, 2);
        const cWaits = c.acquire('job').then((l) => (order.push('c acquired'), l));
        await queued(w, prefixes.lockPrefix, 3);
        expect((await a.holder('job'))?.token).toBe(first.token);
        order.push('a releases');
        await first.release();
        const second = await w.within(bWaits, HANDOFF_MS, 'b takes the lock');
        expect(order).toEqual(['a releases', 'b acquired']);
        expect(second.token).toBeGreaterThan(first.token);
        order.push('b releases');
        await second.release();
        const third = await w.within(cWaits, HANDOFF_MS, 'c takes the lock');
        expect(order).toEqual(['a releases', 'b acquired', 'b releases', 'c acquired']);
        expect(third.token).toBeGreaterThan(second.token);
        await third.release();
      } finally {
        await close();
      }
    });

    it('fenced writes land while the lock is held, and are refused once its key is gone', async () => {
      const { w, clients, prefixes, base, close } = await setUp('fenced', 1);
      const [a] = clients as [Leasehold];
      try {
        const lock = await a.acquire('job');
        const revision = await lock.put(`${base}data/report`, 'v1');
        expect(revision).toBeGreaterThan(lock.token);
        expect(await w.keys(`${base}data/`)).toEqual([
          { key: `${base}data/report`, createRevision: revision },
        ]);
        const [own] = await w.keys(prefixes.lockPrefix);
        await w.deleteKey(own!.key);
        const refused = await lock.put(`${base}data/report`, 'v2').catch((e: unknown) => e);
        expect(refused).toMatchObject({ code: 'LOCK_LOST', token: lock.token });
        expect(lock.isHeld).toBe(false);
        const [data] = await w.keys(`${base}data/`);
        expect(data!.createRevision).toBe(revision);
      } finally {
        await close();
      }
    });

    it('a dead holder loses the lock when its lease ends: the next waiter gets it', async () => {
      const { w, clients, prefixes, close } = await setUp('dead', 2);
      const [a, b] = clients as [Leasehold, Leasehold];
      try {
        const session = await a.session({ ttlSeconds: TTL_SECONDS });
        const held: Lock = await a.acquire('job', { session });
        const lost = new Promise<Error>((resolve) => held.onLost(resolve));
        const next = b.acquire('job');
        await queued(w, prefixes.lockPrefix, 2);
        await w.killHolder(a, session.leaseId, TTL_SECONDS);
        const taken = await w.within(next, HANDOFF_MS, 'b takes the lock of the dead holder');
        expect(taken.token).toBeGreaterThan(held.token);
        const error = await w.within(lost, TTL_SECONDS * 1000, "a's loss signal");
        expect(error).toMatchObject({ code: 'LOCK_LOST', token: held.token });
        expect(held.isHeld).toBe(false);
        expect(held.signal.aborted).toBe(true);
        await taken.release();
      } finally {
        await close();
      }
    });

    it('a revoked lease ends its session: its holds are lost and its keys gone', async () => {
      const { w, clients, prefixes, close } = await setUp('revoke', 2);
      const [a, b] = clients as [Leasehold, Leasehold];
      try {
        const session = await a.session({ ttlSeconds: TTL_SECONDS });
        const lock = await a.acquire('job', { session });
        const leading = await a.campaign('svc', 'a', { session });
        const sessionLost = new Promise<Error>((resolve) => session.onLost(resolve));
        await w.revokeLease(session.leaseId);
        expect(await w.keys(prefixes.lockPrefix)).toEqual([]);
        expect(await w.keys(prefixes.electionPrefix)).toEqual([]);
        const error = await w.within(sessionLost, TTL_SECONDS * 1000, 'the session is lost');
        expect(error).toMatchObject({ code: 'LEASE_LOST', leaseId: session.leaseId });
        expect(lock.isHeld).toBe(false);
        expect(leading.isLeader).toBe(false);
        const next = await w.within(b.acquire('job'), HANDOFF_MS, 'b takes the lock');
        expect(next.token).toBeGreaterThan(lock.token);
        await next.release();
      } finally {
        await close();
      }
    });

    it('read/write lock: readers share, a writer waits for them and excludes the next reader', async () => {
      const { w, clients, prefixes, close } = await setUp('rw', 3);
      const [a, b, c] = clients as [Leasehold, Leasehold, Leasehold];
      try {
        const order: string[] = [];
        const r1 = await a.acquireRead('doc');
        const r2 = await b.acquireRead('doc');
        const writer = c.acquireWrite('doc').then((l) => (order.push('c writes'), l));
        await w.until(
          async () => (await w.keys(prefixes.lockPrefix)).length === 3,
          HANDOFF_MS,
          'c queues to write',
        );
        const lateReader = a
          .acquireRead('doc', { session: await a.session() })
          .then((l) => (order.push('late reader reads'), l));
        const taken = await b.tryAcquireRead('doc').catch((e: unknown) => e);
        expect(taken).toBeInstanceOf(LockTakenError);
        order.push('readers release');
        await Promise.all([r1.release(), r2.release()]);
        const write = await w.within(writer, HANDOFF_MS, 'c takes the write lock');
        expect(write.token).toBeGreaterThan(r2.token);
        order.push('c releases');
        await write.release();
        const read = await w.within(lateReader, HANDOFF_MS, 'the later reader gets in');
        expect(order).toEqual(['readers release', 'c writes', 'c releases', 'late reader reads']);
        await read.release();
      } finally {
        await close();
      }
    });

    it('election: campaign, leader, observe, resign hands over to the next candidate', async () => {
      const { w, clients, close } = await setUp('election', 3);
      const [a, b, c] = clients as [Leasehold, Leasehold, Leasehold];
      const stop = new AbortController();
      try {
        const leadA = await a.campaign('svc', 'a');
        expect(leadA.isLeader).toBe(true);
        expect(await c.leader('svc')).toMatchObject({ value: 'a', token: leadA.token });
        const states = c.observe('svc', { signal: stop.signal });
        const firstState = await w.within(states.next(), HANDOFF_MS, 'first observed state');
        expect((firstState.value as LeaderState).leader?.value).toBe('a');
        const bWaits = b.campaign('svc', 'b');
        await w.until(
          async () => (await c.candidates('svc')).length === 2,
          HANDOFF_MS,
          'b is a candidate',
        );
        expect((await c.candidates('svc')).map((h) => h.value)).toEqual(['a', 'b']);
        await leadA.resign();
        const leadB = await w.within(bWaits, HANDOFF_MS, 'b is elected');
        expect(leadB.token).toBeGreaterThan(leadA.token);
        const seen: (string | undefined)[] = [];
        for (;;) {
          const next = await w.within(states.next(), HANDOFF_MS, 'observed b');
          const leader = (next.value as LeaderState).leader;
          seen.push(leader?.value);
          if (leader?.value === 'b') break;
        }
        expect(seen.filter((v) => v !== undefined)).toEqual(['b']);
        await leadB.resign();
      } finally {
        stop.abort();
        await close();
      }
    });

    it('lead(): one term at a time, the next candidate leads after a shutdown', async () => {
      const { w, clients, close } = await setUp('lead', 2);
      const [a, b] = clients as [Leasehold, Leasehold];
      const [stopA, stopB] = [new AbortController(), new AbortController()];
      try {
        const terms: { who: string; token: bigint }[] = [];
        let running = 0;
        const work = (who: string) => async (ctx: { token: bigint; signal: AbortSignal }) => {
          running++;
          terms.push({ who, token: ctx.token });
          expect(running).toBe(1);
          await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve));
          running--;
        };
        const ranA = a.lead('job', 'a', work('a'), { signal: stopA.signal });
        await w.until(async () => terms.length === 1, HANDOFF_MS, 'a leads');
        const ranB = b.lead('job', 'b', work('b'), { signal: stopB.signal });
        await w.until(
          async () => (await a.candidates('job')).length === 2,
          HANDOFF_MS,
          'b campaigns',
        );
        expect(terms.map((t) => t.who)).toEqual(['a']);
        stopA.abort();
        await w.within(ranA, HANDOFF_MS, "a's lead() resolves");
        await w.until(async () => terms.length === 2, HANDOFF_MS, 'b leads');
        expect(terms.map((t) => t.who)).toEqual(['a', 'b']);
        expect(terms[1]!.token).toBeGreaterThan(terms[0]!.token);
        stopB.abort();
        await w.within(ranB, HANDOFF_MS, "b's lead() resolves");
      } finally {
        stopA.abort();
        stopB.abort();
        await close();
      }
    });

    it('a semaphore admits its permits; the next waiter gets a released one', async () => {
      const { w, clients, close } = await setUp('permits', 3);
      const [a, b, c] = clients as [Leasehold, Leasehold, Leasehold];
      try {
        const pa = await a.acquirePermit('api', { permits: 2, value: 'a' });
        const pb = await b.acquirePermit('api', { permits: 2, value: 'b' });
        const taken = await c.tryAcquirePermit('api', { permits: 2 }).catch((e: unknown) => e);
        expect(taken).toBeInstanceOf(LockTakenError);
        const state = await c.semaphore('api');
        expect(state.permits).toBe(2);
        expect(state.holders.map((h) => h.value).sort()).toEqual(['a', 'b']);
        const cWaits = c.acquirePermit('api', { permits: 2, value: 'c' });
        await w.until(
          async () => (await a.semaphore('api')).waiting.length === 1,
          HANDOFF_MS,
          'c waits',
        );
        await pa.release();
        const pc = await w.within(cWaits, HANDOFF_MS, 'c takes the released permit');
        const after = await a.semaphore('api');
        expect(after.holders.map((h) => h.value).sort()).toEqual(['b', 'c']);
        expect(after.waiting).toEqual([]);
        await Promise.all([pb.release(), pc.release()]);
      } finally {
        await close();
      }
    });
  });
}
