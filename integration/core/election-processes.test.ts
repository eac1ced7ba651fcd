/**
 * Elections between real processes: candidates are killed (SIGKILL), paused (SIGSTOP), shut down
 * (SIGTERM) and restarted with their lease, against the run's etcd. Leaders write through
 * @leasehold/fence to PostgreSQL, so what each term did is checked where the damage would be.
 *
 * Workers report times as wall-clock ms (performance.timeOrigin + performance.now()); this file
 * reads the same clock, so times from different processes compare.
 */
import { fileURLToPath } from 'node:url';
import { connect, defaults, type LeaderState } from '@leasehold/core';
import { fenceTableDDL } from '@leasehold/fence/postgres';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { describeWith, findPostgres, ownSchema } from '../fence/stores.js';
import { monitorLoopLag } from '../setup/lag.js';
import { withDeadline } from './workers/worker.js';
import { WorkerProcess as Proc } from '../setup/worker-process.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

const now = () => performance.timeOrigin + performance.now();
const candidateScript = fileURLToPath(new URL('./workers/candidate-worker.mjs', import.meta.url));
const serviceScript = fileURLToPath(
  new URL('./workers/leader-service-worker.mjs', import.meta.url),
);
const FENCE_TABLE = 'election_fence';
const LOG_TABLE = 'election_log';

/** Key prefixes of the current test; afterEach revokes the leases of killed children's keys. */
const prefixes: string[] = [];

afterEach(async () => {
  // Killed candidates leave keys on leases that would outlive the test by up to 30 s.
  for (const prefix of prefixes.splice(0)) {
    const kvs = await admin.getAll().prefix(prefix).exec();
    const leases = new Set(kvs.kvs.map((kv) => kv.lease).filter((lease) => lease !== '0'));
    for (const ID of leases) await admin.leaseClient.leaseRevoke({ ID }).catch(() => undefined);
    await admin.delete().prefix(prefix);
  }
});

function electionPrefix(label: string): string {
  const prefix = uniquePrefix(label);
  prefixes.push(prefix);
  return prefix;
}

const keysUnder = (prefix: string) => admin.getAll().prefix(prefix).keys();

/** A promise's outcome, readable synchronously once it settled. */
function track<T>(promise: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  void promise.then(
    (value) => Object.assign(state, { settled: true, value }),
    (error: unknown) => Object.assign(state, { settled: true, error }),
  );
  return state;
}

/** The tracked promise's value once it resolved; its error, thrown, if it rejected. */
function valueOf<T>(state: ReturnType<typeof track<T>>): T | undefined {
  if (state.error !== undefined) {
    throw state.error instanceof Error
      ? state.error
      : new Error('the promise rejected', { cause: state.error });
  }
  return state.value;
}

const postgres = await findPostgres();

describeWith(postgres, 'elections between processes', (url) => {
  const schema = ownSchema(url, 'election');
  const env = () => ({
    FENCE_PG_URL: schema.url,
    FENCE_TABLE,
    FENCE_LOG_TABLE: LOG_TABLE,
  });
  beforeAll(async () => {
    const db = schema.admin();
    await db.query(fenceTableDDL({ table: `${schema.name}.${FENCE_TABLE}` }));
    await db.query(
      `CREATE TABLE "${schema.name}"."${LOG_TABLE}" (id bigserial PRIMARY KEY, election text NOT NULL, worker text NOT NULL, token int8 NOT NULL, note text NOT NULL, at_ms int8 NOT NULL)`,
    );
  });

  /** The fenced writes PostgreSQL accepted for `election`, in commit order. */
  async function logOf(election: string) {
    const { rows } = await schema
      .admin()
      .query<{ worker: string; token: string; note: string; at_ms: string }>(
        `SELECT worker, token::text AS token, note, at_ms::text AS at_ms FROM "${schema.name}"."${LOG_TABLE}" WHERE election = $1 ORDER BY id`,
        [election],
      );
    return rows.map((r) => ({ ...r, token: BigInt(r.token), at: Number(r.at_ms) }));
  }

  async function fenceOf(election: string): Promise<bigint | undefined> {
    const { rows } = await schema
      .admin()
      .query<{ token: string }>(
        `SELECT token::text AS token FROM "${schema.name}"."${FENCE_TABLE}" WHERE resource = $1`,
        [election],
      );
    return rows[0] && BigInt(rows[0].token);
  }

  const candidate = (name: string, prefix: string) =>
    Proc.start(name, candidateScript, env(), [endpoints.join(','), prefix, name]);

  const service = (
    name: string,
    prefix: string,
    election: string,
    ttlSeconds: number,
    unitMs: number,
  ) =>
    Proc.start(name, serviceScript, { ...env(), UNIT_MS: String(unitMs) }, [
      endpoints.join(','),
      prefix,
      election,
      name,
      String(ttlSeconds),
    ]);

  it('five lead() processes, leaders SIGKILLed four times: one leader at a time, tokens grow, a leader again after each kill', async () => {
    const prefix = electionPrefix('five');
    const election = 'five';
    const ttl = 2;
    await using client = await connect({ endpoints, electionPrefix: prefix });
    const observed: LeaderState[] = [];
    const stopObserving = new AbortController();
    const observing = (async () => {
      for await (const state of client.observe(election, { signal: stopObserving.signal })) {
        observed.push(state);
      }
    })();

    let started = 0;
    const services: Proc[] = [];
    const add = async () => {
      const name = `svc-${started++}`;
      services.push(await service(name, prefix, election, ttl, 100));
    };
    await Promise.all([add(), add(), add(), add(), add()]);
    await waitFor(async () => (await keysUnder(prefix)).length === 5, {
      what: 'five candidates in the election',
    });

    const electedOf = (proc: Proc) => proc.events.filter((m) => m.event === 'elected');
    const kills: { name: string; token: bigint; at: number }[] = [];
    for (let round = 0; round < 4; round++) {
      const holder = await waitFor(() => client.leader(election), { what: 'a leader' });
      const leader = await waitFor(
        () => services.find((p) => electedOf(p).some((m) => m.key === holder.key)),
        { what: `the process of leader ${holder.key}` },
      );
      // Its term is under way: it has written with its token.
      await leader.event(
        (m) => m.event === 'write' && m.ok === true && m.token === holder.token.toString(),
        `${leader.name} writes as leader`,
      );
      const at = leader.kill('SIGKILL');
      kills.push({ name: leader.name, token: holder.token, at });
      await add(); // five candidates again, the newcomer at the back of the queue
      const next = await waitFor(
        () =>
          services
            .flatMap(electedOf)
            .find((m) => BigInt(m.token as string) > holder.token && (m.at as number) > at),
        { timeoutMs: 20_000, what: `a new leader after killing ${leader.name}` },
      );
      console.log(
        `[five] killed ${leader.name} (token ${holder.token}); token ${next.token as string} elected ${((next.at as number) - at).toFixed(0)} ms later (TTL ${ttl * 1000} ms)`,
      );
    }
    const last = await waitFor(() => client.leader(election), { what: 'a last leader' });
    await waitFor(
      () =>
        services.some((p) =>
          p.events.some(
            (m) => m.event === 'write' && m.ok === true && m.token === last.token.toString(),
          ),
        ),
      { what: 'the last leader writes' },
    );

    const alive = services.filter((p) => p.alive);
    expect(alive).toHaveLength(5);
    for (const proc of alive) proc.kill('SIGTERM');
    const exits = await withDeadline(
      Promise.all(alive.map((p) => p.closed)),
      30_000,
      'services exit after SIGTERM',
    );
    expect(exits).toEqual(alive.map(() => ({ code: 0, signal: null })));
    stopObserving.abort();
    await observing;

    // Terms as the processes saw them: from election to the abort of the work's signal, or to
    // the SIGKILL.
    const terms = services.flatMap((proc) =>
      electedOf(proc).map((m) => {
        const token = m.token as string;
        const seen = proc.events.find((e) => e.event === 'term-end' && e.token === token);
        const kill = kills.find((k) => k.name === proc.name && k.token === BigInt(token));
        return {
          name: proc.name,
          token: BigInt(token),
          start: m.at as number,
          end: (seen?.at as number | undefined) ?? kill?.at,
        };
      }),
    );
    terms.sort((a, b) => a.start - b.start);
    console.log(
      `[five] terms: ${terms.map((t) => `${t.name}#${t.token} ${(t.end! - t.start).toFixed(0)} ms`).join(', ')}`,
    );
    expect(terms.length).toBeGreaterThanOrEqual(kills.length + 1);
    for (const term of terms) expect(term.end, `${term.name}#${term.token} ended`).toBeDefined();
    for (let i = 1; i < terms.length; i++) {
      const [prev, cur] = [terms[i - 1]!, terms[i]!];
      expect(cur.token, `token of ${cur.name} after ${prev.name}`).toBeGreaterThan(prev.token);
      expect(
        cur.start,
        `${cur.name}#${cur.token} starts after ${prev.name}#${prev.token} ended`,
      ).toBeGreaterThanOrEqual(prev.end!);
    }
    for (const kill of kills) {
      expect(terms.some((t) => t.start > kill.at && t.token > kill.token)).toBe(true);
    }

    // etcd's view, in revision order: leaders' tokens only grow, and every term was a leader.
    // (A candidate shut down while it was being elected may lead in etcd without a term.)
    const leaders = observed.flatMap((s) => (s.leader ? [s.leader.token] : []));
    for (let i = 1; i < leaders.length; i++)
      expect(leaders[i]).toBeGreaterThanOrEqual(leaders[i - 1]!);
    for (const term of terms) expect(leaders).toContain(term.token);

    // PostgreSQL's view: accepted writes in commit order carry non-decreasing tokens of known
    // terms, and no write a process began right after its signal said "leader" was refused.
    const log = await logOf(election);
    for (let i = 1; i < log.length; i++)
      expect(log[i]!.token).toBeGreaterThanOrEqual(log[i - 1]!.token);
    for (const row of log) expect(terms.map((t) => t.token)).toContain(row.token);
    const refused = services.flatMap((p) =>
      p.events.filter(
        (m) => m.event === 'write' && /begin$/.test(m.note as string) && m.ok !== true,
      ),
    );
    expect(refused).toEqual([]);
    expect(await fenceOf(election)).toBe(log.at(-1)!.token);
  }, 150_000);

  it('SIGKILL of the leader: the next candidate leads within TTL + 1 s of the lease running out, with a higher token', async () => {
    const prefix = electionPrefix('sigkill');
    const election = 'sigkill';
    const ttl = 3;
    const a = await candidate('a', prefix);
    const b = await candidate('b', prefix);
    await a.request('session', { ttlSeconds: ttl });
    const led = await a.request('campaign', { election, value: 'a' });
    await b.request('session', { ttlSeconds: ttl });
    const waiting = b.request('campaign', { election, value: 'b' });
    void waiting.catch(() => undefined); // awaited below; a failure before then kills b
    await waitFor(async () => (await keysUnder(prefix)).length === 2, { what: 'b queued' });

    const killedAt = a.kill('SIGKILL');
    // etcd reports whole seconds left, rounded down: the lease runs out within remaining + 1 s
    // of this answer.
    const ttlAnswer = await admin.leaseClient.leaseTimeToLive({ ID: led.leaseId as string });
    const answeredAt = now();
    const remaining = Number(ttlAnswer.TTL);
    const elected = await waiting;
    const electedAt = elected.at as number;
    const failoverMs = electedAt - killedAt;
    const expiresBy = answeredAt + (remaining + 1) * 1000;
    console.log(
      `[sigkill] failover ${failoverMs.toFixed(0)} ms after SIGKILL (TTL ${ttl * 1000} ms, keepalive every ${((ttl * 1000) / 3).toFixed(0)} ms); lease had ${remaining} s (+<1 s) left ${(answeredAt - killedAt).toFixed(0)} ms after the kill; elected ${(electedAt - expiresBy).toFixed(0)} ms after the latest possible expiry`,
    );
    expect(BigInt(elected.token as string)).toBeGreaterThan(BigInt(led.token as string));
    expect(elected.leaseId).not.toBe(led.leaseId);
    // The old leader's last keepalive was at most TTL/3 before the kill; its lease ran out TTL
    // after that keepalive arrived.
    expect(failoverMs).toBeLessThanOrEqual(ttl * 1000 + 1000 + (ttl * 1000) / 3);
    // etcd removes an expired lease's keys on its next expiry check (every 500 ms), which the
    // 1 s allows for, measured from the latest moment the lease can have expired.
    expect(electedAt).toBeLessThanOrEqual(expiresBy + 1000);
    expect(remaining).toBeGreaterThan(0);
    expect(remaining).toBeLessThanOrEqual(ttl);
    expect((await b.endInput()).code).toBe(0);
  }, 60_000);

  it('SIGSTOP of the leader past its TTL: a new leader is elected; after SIGCONT the old one sees its signal aborted before writing, and its old token is refused', async () => {
    const prefix = electionPrefix('sigstop');
    const election = 'sigstop';
    const ttl = 2;
    const a = await candidate('a', prefix);
    const b = await candidate('b', prefix);
    await a.request('session', { ttlSeconds: ttl });
    const led = await a.request('campaign', { election, value: 'a' });
    await a.request('loop', { intervalMs: 100, writeAnyway: true });
    await a.event((m) => m.event === 'tick' && m.ok === true, 'a writes as leader');
    await b.request('session', { ttlSeconds: ttl });
    const waiting = b.request('campaign', { election, value: 'b' });
    void waiting.catch(() => undefined); // awaited below; a failure before then kills b
    await waitFor(async () => (await keysUnder(prefix)).length === 2, { what: 'b queued' });

    const stoppedAt = a.kill('SIGSTOP');
    const elected = await waiting;
    const written = await b.request('write', { note: 'new leader' });
    expect(written).toMatchObject({ ok: true, abortedBefore: false });
    expect(BigInt(elected.token as string)).toBeGreaterThan(BigInt(led.token as string));
    const resumedAt = a.kill('SIGCONT');
    console.log(
      `[sigstop] a paused ${(resumedAt - stoppedAt).toFixed(0)} ms (TTL ${ttl * 1000} ms); b elected ${((elected.at as number) - stoppedAt).toFixed(0)} ms into the pause`,
    );

    const late = await a.event((m) => m.event === 'late-write', 'a writes with its old token');
    const ticks = a.events.filter((m) => m.event === 'tick');
    // The loop stops at the first check that finds the term over: no check after the pause
    // found it alive, and the one that stopped it named the loss.
    expect(ticks.filter((m) => m.aborted === false && (m.at as number) > stoppedAt)).toEqual([]);
    expect(ticks.at(-1)).toMatchObject({ aborted: true, error: 'LeadershipLostError' });
    expect(ticks.filter((m) => m.aborted === true)).toHaveLength(1);
    expect(await a.event((m) => m.event === 'lost', 'a lost event')).toMatchObject({
      error: 'LeadershipLostError',
    });
    expect(late).toMatchObject({ ok: false, stale: true, highest: elected.token });
    // Nothing of a's landed after b's first write.
    const log = await logOf(election);
    const firstOfB = log.findIndex((r) => r.worker === 'b');
    expect(firstOfB).toBeGreaterThan(0);
    expect(log.slice(firstOfB).every((r) => r.worker === 'b')).toBe(true);
    expect(await fenceOf(election)).toBe(BigInt(elected.token as string));
    expect((await a.endInput()).code).toBe(0);
    expect((await b.endInput()).code).toBe(0);
  }, 60_000);

  it('lead() shut down with SIGTERM drains its work, resigns and exits 0; the next candidate leads long before the 30 s TTL', async () => {
    const prefix = electionPrefix('sigterm');
    const election = 'sigterm';
    const ttl = 30;
    const a = await service('a', prefix, election, ttl, 1_000);
    const ledA = await a.event((m) => m.event === 'elected', 'a elected');
    const b = await service('b', prefix, election, ttl, 1_000);
    await waitFor(async () => (await keysUnder(prefix)).length === 2, { what: 'b queued' });
    // SIGTERM lands inside a unit of work (each takes 1 s): right after the next one begins.
    const begins = () =>
      a.events.filter((m) => m.event === 'write' && /^unit \d+ begin$/.test(m.note as string));
    const unit = begins().length + 1;
    await a.event((m) => m.note === `unit ${unit} begin`, `a begins unit ${unit}`);
    const termAt = a.kill('SIGTERM');
    const exit = await withDeadline(a.closed, 20_000, 'a exits after SIGTERM');
    const ledB = await b.event((m) => m.event === 'elected', 'b elected', 20_000);
    const handoverMs = (ledB.at as number) - termAt;
    console.log(`[sigterm] b elected ${handoverMs.toFixed(0)} ms after a's SIGTERM (TTL ${ttl} s)`);

    expect(exit).toEqual({ code: 0, signal: null });
    const names = a.events.map((m) => m.event);
    expect(names.slice(names.indexOf('sigterm'))).toEqual([
      'sigterm',
      'term-end',
      'write',
      'drained',
      'lead-returned',
      'closed',
    ]);
    const termEnd = a.events.find((m) => m.event === 'term-end')!;
    const drained = a.events.find((m) => m.event === 'drained')!;
    const writes = a.events.filter((m) => m.event === 'write');
    expect(writes.every((m) => m.ok === true)).toBe(true);
    // The unit under way when the signal aborted was finished, then the work returned.
    const [begun, ended] = writes.slice(-2);
    expect(begun).toMatchObject({ note: `unit ${unit} begin` });
    expect(ended).toMatchObject({ note: `unit ${unit} end` });
    expect(termEnd.at as number).toBeGreaterThan(begun!.at as number);
    expect(termEnd.at as number).toBeLessThan(ended!.at as number);
    expect(drained).toMatchObject({ ok: true, units: unit });
    // b took over through a's resignation after the drain, not through its lease expiring.
    expect(ledB.at as number).toBeGreaterThan(drained.at as number);
    expect(handoverMs).toBeLessThan((ttl * 1000) / 2);
    expect(BigInt(ledB.token as string)).toBeGreaterThan(BigInt(ledA.token as string));
    await b.event((m) => m.event === 'write' && m.ok === true, 'b writes');
    const log = await logOf(election);
    const firstOfB = log.findIndex((r) => r.worker === 'b');
    expect(log.slice(0, firstOfB).map((r) => r.note)).toEqual([
      ...Array.from({ length: unit }, (_, i) => [
        `unit ${i + 1} begin`,
        `unit ${i + 1} end`,
      ]).flat(),
      'drained',
    ]);
    b.kill('SIGTERM');
    expect(await withDeadline(b.closed, 20_000, 'b exits after SIGTERM')).toEqual({
      code: 0,
      signal: null,
    });
    expect(await keysUnder(prefix)).toEqual([]);
  }, 60_000);

  it('a leader restarted with its lease id leads again at once with the same token, ahead of the candidate waiting behind it', async () => {
    const prefix = electionPrefix('resume-leader');
    const election = 'resume';
    await using client = await connect({ endpoints, electionPrefix: prefix });
    const a = await candidate('a', prefix);
    const b = await candidate('b', prefix);
    const { leaseId } = await a.request('session', { ttlSeconds: 30 });
    const led = await a.request('campaign', { election, value: 'a' });
    await b.request('session', { ttlSeconds: 30 });
    const waiting = track(b.request('campaign', { election, value: 'b' }));
    await waitFor(async () => (await keysUnder(prefix)).length === 2, { what: 'b queued' });
    const keysBefore = await keysUnder(prefix);

    a.kill('SIGKILL');
    await a.closed;
    const again = await candidate('a-restarted', prefix);
    await again.request('session', { leaseId });
    using lag = monitorLoopLag();
    const asked = now();
    const resumed = await again.request('campaign', { election, value: 'a' }, 10_000);
    console.log(
      `[resume] the restarted leader was leader again ${((resumed.at as number) - asked).toFixed(0)} ms after campaigning`,
    );
    expect(resumed).toMatchObject({ token: led.token, key: led.key, leaseId });
    // At once: a resumed campaign waits for nothing, it makes one join (which reads the queue
    // too) that a healthy etcd answers in milliseconds. Its budget is two attempt deadlines (a
    // budget, not what the SDK enforces: on one endpoint an attempt gets the whole call
    // deadline), far below the 30 s TTL a campaign that waited would take; the worker's own
    // loop lag and the stdin hop are inside that budget.
    expect((resumed.at as number) - asked).toBeLessThan(
      2 * defaults.attemptTimeoutMs + lag.maxLagMs,
    );
    expect(waiting.settled).toBe(false);
    expect(await keysUnder(prefix)).toEqual(keysBefore);
    expect(await client.leader(election)).toMatchObject({ key: led.key, value: 'a' });
    expect(waiting.settled).toBe(false);

    await again.request('resign');
    const bLed = await waitFor(() => valueOf(waiting), { what: 'b elected after the resign' });
    expect(BigInt(bLed.token as string)).toBeGreaterThan(BigInt(led.token as string));
    expect((await again.endInput()).code).toBe(0);
    expect((await b.endInput()).code).toBe(0);
  }, 60_000);

  it('a waiting candidate restarted with its lease id keeps its place in the queue', async () => {
    const prefix = electionPrefix('resume-waiter');
    const election = 'resume';
    const lead = await candidate('lead', prefix);
    const b = await candidate('b', prefix);
    const c = await candidate('c', prefix);
    await lead.request('session', { ttlSeconds: 30 });
    const led = await lead.request('campaign', { election, value: 'lead' });
    const { leaseId } = await b.request('session', { ttlSeconds: 30 });
    void b.request('campaign', { election, value: 'b' }).catch(() => undefined);
    await waitFor(async () => (await keysUnder(prefix)).length === 2, { what: 'b queued' });
    await c.request('session', { ttlSeconds: 30 });
    const cWaiting = track(c.request('campaign', { election, value: 'c' }));
    await waitFor(async () => (await keysUnder(prefix)).length === 3, { what: 'c queued' });
    const bKey = `${prefix}${election}/${BigInt(leaseId as string).toString(16)}`;
    const [before] = (await admin.get(bKey).exec()).kvs;
    expect(before).toBeDefined();

    b.kill('SIGKILL');
    await b.closed;
    const again = await candidate('b-restarted', prefix);
    await again.request('session', { leaseId });
    // A new value: the resumed candidacy proclaims it on its own key, which shows it joined.
    const bWaiting = track(again.request('campaign', { election, value: 'b-restarted' }));
    const after = await waitFor(
      async () => {
        const [kv] = (await admin.get(bKey).exec()).kvs;
        return kv?.value.toString() === 'b-restarted' ? kv : undefined;
      },
      { what: "the restarted candidate's value on its old key" },
    );
    expect(after.create_revision).toBe(before!.create_revision);
    expect((await keysUnder(prefix)).length).toBe(3);
    expect(bWaiting.settled).toBe(false);

    await lead.request('resign');
    const bLed = await waitFor(() => valueOf(bWaiting), {
      what: 'the restarted candidate elected',
    });
    expect(bLed).toMatchObject({ token: before!.create_revision, key: bKey, value: 'b-restarted' });
    expect(BigInt(bLed.token as string)).toBeGreaterThan(BigInt(led.token as string));
    expect(cWaiting.settled).toBe(false);

    await again.request('resign');
    const cLed = await waitFor(() => valueOf(cWaiting), { what: 'c elected after b resigned' });
    expect(BigInt(cLed.token as string)).toBeGreaterThan(BigInt(bLed.token as string));
    for (const proc of [lead, again, c]) expect((await proc.endInput()).code).toBe(0);
  }, 60_000);
});
