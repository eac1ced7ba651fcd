/**
 * @leasehold/cron between real processes on the run's etcd: replicas are killed (SIGKILL),
 * paused (SIGSTOP), skewed (their wall clock offset by ±3 s) and stopped (SIGTERM). Every run
 * writes one row through @leasehold/fence into PostgreSQL, fenced by its token on the resource
 * (job, fire): duplicates and misses are counted from that table, where the damage would be.
 */
import { connect } from '@leasehold/core';
import { createScheduler, type HistoryEntry } from '@leasehold/cron';
import { setTimeout as delay } from 'node:timers/promises';
import { afterAll, afterEach, expect, it } from 'vitest';
import { etcdClient, sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { describeWith, findPostgres } from '../fence/stores.js';
import {
  countRuns,
  Proc,
  replicaEnv,
  replicaScript,
  runsSchema,
  waitForFires,
  type Msg,
  type Row,
} from './harness.js';

const endpoints = sharedEndpoints();
const admin = etcdClient(endpoints);
afterAll(() => admin.close());

/** Prefixes of the current test, removed afterwards (records sit on 2-minute retention leases). */
const prefixes: string[] = [];
afterEach(async () => {
  for (const prefix of prefixes.splice(0)) await admin.delete().prefix(prefix);
});
function cronPrefix(label: string): string {
  const prefix = uniquePrefix(`cron-${label}`);
  prefixes.push(prefix);
  return prefix;
}

/** The records of `job` under `prefix`, read as any user would: scheduler.history(). */
async function historyOf(prefix: string, job: string): Promise<HistoryEntry[]> {
  await using client = await connect({ endpoints });
  const scheduler = await createScheduler(client, { prefix });
  try {
    return await scheduler.history(job, { limit: 1000 });
  } finally {
    await scheduler.stop();
  }
}

/** Fires whose record names `runner`: a killed or paused runner's claims, not misses. */
const claimedBy = (history: HistoryEntry[], runner: string) =>
  new Set(history.filter((h) => h.runner === runner).map((h) => h.fireTime.toISOString()));

/** Milliseconds until the wall clock is `phaseMs` into a period of `periodMs`. */
const untilPhase = (periodMs: number, phaseMs: number) =>
  (phaseMs - (Date.now() % periodMs) + periodMs) % periodMs;

const summary = (label: string, c: ReturnType<typeof countRuns>, rows: Row[]) => {
  const per = new Map<string, number>();
  for (const r of rows) per.set(r.runner, (per.get(r.runner) ?? 0) + 1);
  console.log(
    `[cron ${label}] ${c.fires} fires: duplicates ${c.duplicates}, misses ${c.misses}; runs per replica ${JSON.stringify(Object.fromEntries(per))}`,
  );
};

const postgres = await findPostgres();

describeWith(postgres, '@leasehold/cron replicas', (url) => {
  const db = runsSchema(url, 'cron');
  const start = (name: string, prefix: string, extra: Record<string, string> = {}) =>
    Proc.start(
      name,
      replicaScript,
      replicaEnv(endpoints, prefix, { TTL_SECONDS: '2', ...db.env(), ...extra }),
    );

  it('three replicas on a 1 s schedule: each of at least 15 fires runs exactly once', async () => {
    const prefix = cronPrefix('once');
    const job = 'every-second';
    const replicas = await Promise.all(['a', 'b', 'c'].map((n) => start(n, prefix)));
    await Promise.all(
      replicas.map((p) =>
        p.request('schedule', {
          job,
          schedule: '* * * * * *',
          // Claims alone decide who runs: with the default `overlap: 'skip'` a fire that comes
          // while the previous run's record is still being written (a loaded host) is skipped
          // by design; that policy has a test of its own below.
          options: { retentionSeconds: 120, overlap: 'allow' },
          runMs: 50,
        }),
      ),
    );
    await waitForFires(() => db.rows(job), 17, '17 fires run', 60_000);
    for (const exit of await Promise.all(replicas.map((p) => p.terminate()))) {
      expect(exit).toEqual({ code: 0, signal: null });
    }
    const rows = await db.rows(job);
    const counts = countRuns(rows, 1000);
    summary('3 replicas', counts, rows);
    for (const fire of counts.missing) {
      // What each replica did with a missed fire: the first thing to read when this fails.
      const seen = replicas.map((p) => [p.name, p.events.filter((m) => m.fire === fire)]);
      console.log(`[cron 3 replicas] missed ${fire}: ${JSON.stringify(seen)}`);
    }
    expect(counts.duplicates).toBe(0);
    expect(counts.missing).toEqual([]);
    expect(counts.fires).toBeGreaterThanOrEqual(15);
    // Tokens are create revisions, one per claim: distinct. They grow in claim order, which is
    // fire order only on a quiet host: a fire may be claimed up to lateToleranceMs (5 s) late,
    // after the next fire's claim.
    expect(new Set(rows.map((r) => r.token)).size).toBe(rows.length);
    const outOfOrder = rows.filter((r, i) => i > 0 && r.token < rows[i - 1]!.token).length;
    console.log(`[cron 3 replicas] fires claimed after a later fire's claim: ${outOfOrder}`);
    // The others skipped each fire because they found its claim.
    const elsewhere = replicas.flatMap((p) =>
      p.all('skipped').filter((m) => m.reason === 'claimed-elsewhere'),
    );
    expect(elsewhere.length).toBeGreaterThanOrEqual(2 * (counts.fires - 2));
    // The records agree with the table: same runner and token per fire, outcome ok.
    const history = await historyOf(prefix, job);
    const lastFire = Date.parse(rows[rows.length - 1]!.fire);
    for (const row of rows) {
      const entry = history.find((h) => h.fireTime.toISOString() === row.fire);
      expect(entry, row.fire).toMatchObject({ token: row.token, runner: row.runner });
      // A run still going at SIGTERM had its signal aborted by stop(): 'stopped'.
      if (Date.parse(row.fire) < lastFire - 2000) expect(entry!.outcome, row.fire).toBe('ok');
      else expect(['ok', 'stopped']).toContain(entry!.outcome);
    }
  }, 150_000);

  /** The replica whose run of a fire has written and not yet finished, if any. */
  function runningNow(replicas: Proc[]): { proc: Proc; fire: string } | undefined {
    for (const proc of replicas) {
      const wrote = proc.all('wrote');
      const last = wrote[wrote.length - 1];
      if (!last) continue;
      const done = proc.all('finished').some((m) => m.fire === last.fire);
      if (!done) return { proc, fire: last.fire as string };
    }
    return undefined;
  }

  for (const signal of ['SIGKILL', 'SIGSTOP'] as const) {
    it(`${signal} of the replica running a job: no fire runs twice, later fires run on the others`, async () => {
      const prefix = cronPrefix(signal);
      const job = `slow-${signal}`;
      const replicas = await Promise.all(['a', 'b', 'c'].map((n) => start(n, prefix)));
      // Runs of 2.5 s on a 1 s schedule overlap ('allow'): at any moment some replica is running.
      await Promise.all(
        replicas.map((p) =>
          p.request('schedule', {
            job,
            schedule: '* * * * * *',
            options: { overlap: 'allow', retentionSeconds: 120 },
            runMs: 2500,
          }),
        ),
      );
      await waitForFires(() => db.rows(job), 5, '5 fires run');
      const target = await waitFor(() => runningNow(replicas), { what: 'a replica mid-run' });
      const victim = target.proc;
      victim.kill(signal);
      const after = (rows: Row[]) => rows.filter((r) => r.fire > target.fire);
      const laterRows = await waitFor(
        async () => {
          const later = after(await db.rows(job));
          return new Set(later.map((r) => r.fire)).size >= 10 ? later : undefined;
        },
        { timeoutMs: 40_000, intervalMs: 200, what: `10 fires after ${signal} of ${victim.name}` },
      );
      expect(laterRows.some((r) => r.runner !== victim.name)).toBe(true);
      if (signal === 'SIGSTOP') {
        victim.kill('SIGCONT');
        // Its lease ran out while it was stopped: the run's signal says so on resume.
        const lost = await victim.event(
          (m) => m.event === 'lost' && m.fire === target.fire,
          `${victim.name} reports the lost run of ${target.fire}`,
        );
        expect(lost.error).toBe('LeaseLostError');
        const finished = await victim.event(
          (m) => m.event === 'finished' && m.fire === target.fire,
          `${victim.name} finishes ${target.fire}`,
        );
        expect(finished.outcome).toBe('lost');
        // After resuming it takes part again; later fires still run once each.
        const resumedAt = Date.now();
        await waitFor(
          async () =>
            new Set((await db.rows(job)).filter((r) => r.start > resumedAt).map((r) => r.fire))
              .size >= 3,
          { timeoutMs: 20_000, intervalMs: 200, what: '3 fires after SIGCONT' },
        );
      }
      const survivors = replicas.filter((p) => p !== victim);
      for (const p of signal === 'SIGSTOP' ? replicas : survivors) await p.terminate();
      const rows = await db.rows(job);
      const history = await historyOf(prefix, job);
      const counts = countRuns(rows, 1000, claimedBy(history, victim.name));
      summary(`${signal} ${victim.name}`, counts, rows);
      expect(counts.duplicates).toBe(0);
      expect(counts.missing).toEqual([]);
      expect(counts.byFire.get(target.fire)).toHaveLength(1);
      // The fire it was running is on record as its, and lost: nobody ran it again.
      const entry = await waitFor(
        async () =>
          (await historyOf(prefix, job)).find(
            (h) => h.fireTime.toISOString() === target.fire && h.outcome === 'lost',
          ),
        { timeoutMs: 10_000, what: `the record of ${target.fire} says lost` },
      );
      expect(entry.runner).toBe(victim.name);
    }, 150_000);
  }

  it('replicas whose clocks are 3 s ahead, on time and 3 s behind neither re-run nor skip a fire', async () => {
    const prefix = cronPrefix('skew');
    const job = 'skewed';
    const ahead = await start('ahead', prefix, { OFFSET_MS: '3000' });
    const onTime = await start('on-time', prefix, { OFFSET_MS: '0' });
    const behind = await start('behind', prefix, { OFFSET_MS: '-3000' });
    for (const p of [ahead, onTime, behind]) {
      await p.request('schedule', {
        job,
        schedule: '* * * * * *',
        options: { overlap: 'allow', retentionSeconds: 120 },
        runMs: 50,
      });
    }
    const allUp = Date.now();
    // The replica ahead reaches every fire first; then the one on time; the one behind last.
    await waitForFires(() => db.rows(job), 12, '12 fires with all three up');
    expect(await ahead.terminate()).toEqual({ code: 0, signal: null });
    const phase2 = Date.now();
    await waitFor(
      async () => (await db.rows(job)).filter((r) => r.runner === 'on-time').length >= 10,
      { timeoutMs: 30_000, intervalMs: 200, what: '10 fires run by the replica on time' },
    );
    expect(await onTime.terminate()).toEqual({ code: 0, signal: null });
    await waitFor(
      async () => (await db.rows(job)).filter((r) => r.runner === 'behind').length >= 10,
      { timeoutMs: 30_000, intervalMs: 200, what: '10 fires run by the replica behind' },
    );
    expect(await behind.terminate()).toEqual({ code: 0, signal: null });

    const rows = await db.rows(job);
    const counts = countRuns(rows, 1000);
    summary('skew ±3 s', counts, rows);
    expect(counts.duplicates).toBe(0);
    expect(counts.missing).toEqual([]);
    // While a replica ahead was up nobody else ran anything; the one behind found every fire the
    // others ran already claimed (3 s after them) and never ran it again.
    const runnersWhile = (from: number, to: number) =>
      new Set(rows.filter((r) => r.start >= from && r.start < to).map((r) => r.runner));
    // (Fires from before the one ahead started are run by whoever reaches them first.)
    expect(runnersWhile(allUp + 4000, phase2)).toEqual(new Set(['ahead']));
    const behindSkips = new Set(
      behind
        .all('skipped')
        .filter((m) => m.reason === 'claimed-elsewhere')
        .map((m) => m.fire as string),
    );
    const ranByOthers = new Set(rows.filter((r) => r.runner !== 'behind').map((r) => r.fire));
    expect(ranByOthers.size).toBeGreaterThanOrEqual(15);
    expect(behindSkips).toEqual(ranByOthers);
    // Fires are named by the expression, not by a replica's clock: all three name them alike.
    for (const r of rows) expect(Date.parse(r.fire) % 1000).toBe(0);
  }, 150_000);

  it("overlap 'skip': a fire is skipped while the previous run goes on anywhere; runs never overlap", async () => {
    const prefix = cronPrefix('overlap');
    const job = 'long';
    const replicas = await Promise.all(['a', 'b'].map((n) => start(n, prefix)));
    await Promise.all(
      replicas.map((p) =>
        p.request('schedule', {
          job,
          schedule: '* * * * * *',
          options: { overlap: 'skip', retentionSeconds: 120 },
          runMs: 2500,
          honorSignal: false,
        }),
      ),
    );
    await waitFor(async () => (await db.rows(job)).filter((r) => r.end !== undefined).length >= 4, {
      timeoutMs: 40_000,
      intervalMs: 200,
      what: '4 runs completed',
    });
    for (const p of replicas) await p.terminate();
    const rows = (await db.rows(job)).filter((r) => r.end !== undefined);
    for (let i = 1; i < rows.length; i++) {
      const [prev, cur] = [rows[i - 1]!, rows[i]!];
      expect(cur.start, `${cur.fire} starts after ${prev.fire} ended`).toBeGreaterThanOrEqual(
        prev.end!,
      );
      expect(Date.parse(cur.fire) - Date.parse(prev.fire)).toBeGreaterThanOrEqual(3000);
    }
    const overlaps = replicas.flatMap((p) =>
      p.all('skipped').filter((m) => m.reason === 'overlap'),
    );
    expect(overlaps.length).toBeGreaterThanOrEqual(2 * 2 * (rows.length - 1));
    // A fire skipped for overlap by every replica has no record and no run. (One replica may
    // reach a fire while the run before is still being recorded, and the other just after:
    // then the other runs it — on a loaded host, a run of 2.5 s can end past the next second.)
    const history = await historyOf(prefix, job);
    const skippedBy = new Map<string, Set<string>>();
    replicas.forEach((p, i) => {
      for (const m of p.all('skipped').filter((s) => s.reason === 'overlap')) {
        skippedBy.set(m.fire as string, (skippedBy.get(m.fire as string) ?? new Set()).add(`${i}`));
      }
    });
    const byAll = [...skippedBy].filter(([, by]) => by.size === replicas.length).map(([f]) => f);
    expect(byAll.length).toBeGreaterThanOrEqual(2 * (rows.length - 1));
    for (const fire of byAll) {
      expect(
        history.some((h) => h.fireTime.toISOString() === fire),
        fire,
      ).toBe(false);
    }
    for (const [fire, by] of skippedBy) {
      if (by.size === replicas.length) continue;
      // Skipped by one only: if the other ran it, its run began after the one before ended.
      const ran = rows.find((r) => r.fire === fire);
      const before = rows.filter((r) => r.fire < fire).at(-1);
      if (ran && before) expect(ran.start, fire).toBeGreaterThanOrEqual(before.end!);
    }
    const counts = countRuns(await db.rows(job), 1000);
    console.log(
      `[cron overlap skip] ${rows.length} runs of 2.5 s, ${overlaps.length} overlap skips, duplicates ${counts.duplicates}`,
    );
    expect(counts.duplicates).toBe(0);
  }, 120_000);

  it("misfire at start-up: a fire older than lateToleranceMs is missed ('run-once' catches the latest up once, 'skip' does not run it); one within lateToleranceMs is on time", async () => {
    const prefix = cronPrefix('misfire-start');
    const period = 2000;
    const toleranceMs = 200;
    const options = (misfire: string) => ({
      misfire,
      lateToleranceMs: toleranceMs,
      retentionSeconds: 120,
      ...(misfire === 'run-once' ? { catchUpWindowMs: 60_000 } : {}),
    });
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((n) => start(n, prefix)));
    // Each replica schedules its job 1 s into a 2 s period by its own clock: the fire 1 s
    // before is then 800 ms past lateToleranceMs, and nobody had the job then. The timing that
    // counts is when it actually planned (a loaded host runs timers late): the replica reports
    // its clock around schedule(). Started within lateToleranceMs of a fire, a replica reached
    // that fire on time: it claims it as 'scheduled', whatever `misfire` says.
    const startAt = { atPhaseMs: 1000, periodMs: period };
    const latestFire = (ms: number) => Math.floor(ms / period) * period;
    /** The latest fire when a replica planned, and whether it was missed (or on time). */
    const startedNear = (answer: Msg) => {
      const [before, after] = [answer.before as number, answer.after as number];
      const fire = latestFire(before);
      expect(latestFire(after), 'planned within one period').toBe(fire);
      const missed = before - fire > toleranceMs;
      const onTime = after - fire <= toleranceMs;
      return { fire, id: new Date(fire).toISOString(), missed, onTime, ageMs: before - fire };
    };
    const scheduleOn = async (proc: Proc, job: string, misfire: string) =>
      startedNear(
        await proc.request('schedule', {
          job,
          schedule: { everyMs: period },
          options: options(misfire),
          ...startAt,
        }),
      );
    const runOnceAt = await scheduleOn(a!, 'catch-up', 'run-once');
    const skipAt = await scheduleOn(c!, 'no-catch-up', 'skip');
    // And a replica starting 200 ms after a fire, with 1 s of tolerance: it reached that fire on
    // time, so it runs it under misfire 'skip' too (800 ms of margin for a late timer).
    const onTimeOptions = { ...options('skip'), lateToleranceMs: 1000 };
    const answer = await c!.request('schedule', {
      job: 'on-time-start',
      schedule: { everyMs: period },
      options: onTimeOptions,
      atPhaseMs: 200,
      periodMs: period,
    });
    const onTimeFire = latestFire(answer.before as number);
    const onTimeAge = (answer.after as number) - onTimeFire;
    await waitForFires(() => db.rows('catch-up'), 3, '3 fires of catch-up');
    // A second replica starting later tries to catch up its own latest missed fire: it finds
    // that fire run already (by a, on time), and does not run it again.
    const laterAt = await scheduleOn(b!, 'catch-up', 'run-once');
    if (laterAt.missed) {
      await b!.event(
        (m) => m.event === 'skipped' && m.fire === laterAt.id && m.reason === 'claimed-elsewhere',
        'b finds the fire it would catch up already run',
      );
    }
    await waitForFires(() => db.rows('no-catch-up'), 3, '3 fires of no-catch-up');
    await waitForFires(() => db.rows('on-time-start'), 1, 'the fire the on-time replica reached');
    for (const p of [a!, b!, c!]) await p.terminate();
    console.log(
      `[cron misfire start-up] planned ${runOnceAt.ageMs}, ${skipAt.ageMs} and ${laterAt.ageMs} ms after the latest fire (lateToleranceMs ${toleranceMs})`,
    );

    const runOnce = await db.rows('catch-up');
    // The fire before a started: caught up if missed, run as scheduled if a started on time.
    expect(runOnce[0]).toMatchObject({ fire: runOnceAt.id, runner: 'a' });
    if (runOnceAt.missed) expect(runOnce[0]!.attempt).toBe('catch-up');
    if (runOnceAt.onTime) expect(runOnce[0]!.attempt).toBe('scheduled');
    expect(runOnce.slice(1).every((r) => r.attempt === 'scheduled')).toBe(true);
    const skip = await db.rows('no-catch-up');
    // Missed: never run; on time: run, as scheduled.
    if (skipAt.missed) expect(Date.parse(skip[0]!.fire)).toBeGreaterThan(skipAt.fire);
    if (skipAt.onTime) expect(skip[0]!.fire).toBe(skipAt.id);
    expect(skip.every((r) => r.attempt === 'scheduled')).toBe(true);
    for (const rows of [runOnce, skip]) expect(countRuns(rows, period).duplicates).toBe(0);
    expect(countRuns(runOnce, period).missing).toEqual([]);
    expect(runOnce.filter((r) => r.fire === laterAt.id)).toHaveLength(1);
    const onTime = await db.rows('on-time-start');
    expect(onTimeAge, 'the on-time replica planned within its tolerance').toBeLessThanOrEqual(1000);
    expect(onTime[0]).toMatchObject({
      fire: new Date(onTimeFire).toISOString(),
      attempt: 'scheduled',
    });
  }, 120_000);

  it("misfire after a stall (SIGSTOP of the only replicas): 'run-once' catches up the latest fire once, 'skip' none", async () => {
    const prefix = cronPrefix('misfire-stall');
    const period = 2000;
    // The lease outlives the pause: this is a stalled process, not a lost one.
    const env = { TTL_SECONDS: '15' };
    const [once, skip] = await Promise.all([
      start('once', prefix, env),
      start('skip', prefix, env),
    ]);
    await once.request('schedule', {
      job: 'stall-once',
      schedule: { everyMs: period },
      options: {
        misfire: 'run-once',
        lateToleranceMs: 200,
        catchUpWindowMs: 60_000,
        retentionSeconds: 120,
      },
    });
    await skip.request('schedule', {
      job: 'stall-skip',
      schedule: { everyMs: period },
      options: { misfire: 'skip', lateToleranceMs: 200, retentionSeconds: 120 },
    });
    await waitForFires(() => db.rows('stall-once'), 2, '2 fires before the stall');
    await waitForFires(() => db.rows('stall-skip'), 2, '2 fires before the stall');
    once.kill('SIGSTOP');
    skip.kill('SIGSTOP');
    const stoppedAt = Date.now();
    // Resumed 1 s into a period, after at least two fires came and went.
    await delay(Math.max(0, stoppedAt + 4500 - Date.now()) + untilPhase(period, 1000));
    const resumedAt = Date.now();
    once.kill('SIGCONT');
    skip.kill('SIGCONT');
    const latestMissed = new Date(Math.floor(resumedAt / period) * period).toISOString();
    await once.event(
      (m) => m.event === 'wrote' && m.fire === latestMissed,
      'the latest missed fire is caught up',
    );
    await skip.event((m) => m.event === 'skipped' && m.reason === 'misfire', 'a misfire skip');
    await waitFor(async () => (await db.rows('stall-skip')).some((r) => r.start > resumedAt), {
      timeoutMs: 10_000,
      what: 'stall-skip runs again after the stall',
    });
    await once.terminate();
    await skip.terminate();

    const during = (rows: Row[]) =>
      rows.filter((r) => Date.parse(r.fire) > stoppedAt && Date.parse(r.fire) <= resumedAt);
    const caught = during(await db.rows('stall-once'));
    expect(caught.map((r) => [r.fire, r.attempt])).toEqual([[latestMissed, 'catch-up']]);
    expect(during(await db.rows('stall-skip'))).toEqual([]);
    const missedOnce = once.all('skipped').filter((m) => m.reason === 'misfire');
    const missedSkip = skip.all('skipped').filter((m: Msg) => m.reason === 'misfire');
    expect(missedOnce.length).toBeGreaterThanOrEqual(1);
    expect(missedOnce.some((m) => m.fire === latestMissed)).toBe(false);
    expect(missedSkip.some((m) => m.fire === latestMissed)).toBe(true);
    console.log(
      `[cron misfire stall] paused ${resumedAt - stoppedAt} ms: run-once caught up ${latestMissed} and skipped ${missedOnce.length}; skip skipped ${missedSkip.length}`,
    );
  }, 120_000);

  it("overlap 'replace': a replica that reaches a fire after another replica claimed a later one does not replace that later run with the older fire", async () => {
    const prefix = cronPrefix('replace-order');
    const job = 'replace-order';
    const AHEAD_MS = 6_000;
    const options = { overlap: 'replace', lateToleranceMs: 10_000, retentionSeconds: 120 };
    // Two fires 2 s apart in one minute, at least 12 s from now.
    let f1 = Math.ceil((Date.now() + 12_000) / 1000) * 1000;
    while (new Date(f1).getUTCSeconds() > 57) f1 += 1000;
    const f2 = f1 + 2_000;
    const d = new Date(f1);
    const schedule = `${d.getUTCSeconds()},${d.getUTCSeconds() + 2} ${d.getUTCMinutes()} ${d.getUTCHours()} ${d.getUTCDate()} ${d.getUTCMonth() + 1} *`;
    const iso = (ms: number) => new Date(ms).toISOString();
    // a runs 6 s ahead of b; both leases outlive a's pause.
    const [a, b] = await Promise.all([
      start('a', prefix, { OFFSET_MS: String(AHEAD_MS), TTL_SECONDS: '30' }),
      start('b', prefix, { TTL_SECONDS: '30' }),
    ]);
    await Promise.all(
      [a, b].map((p) => p.request('schedule', { job, schedule, options, runMs: 8_000 })),
    );
    // a is paused across both fires by its clock (6 s before b's), and resumes 2.5 s after the
    // first by its clock, 3.5 s before b reaches it: due at once, it claims only the later fire.
    await delay(f1 - AHEAD_MS - 2_000 - Date.now());
    a.kill('SIGSTOP');
    await delay(f1 - 3_500 - Date.now());
    a.kill('SIGCONT');
    const superseded = await a.event(
      (m) => m.event === 'skipped' && m.fire === iso(f1),
      'a skips the first fire',
    );
    expect(superseded.reason).toBe('overlap');
    const claimed = await a.event(
      (m) => m.event === 'claimed' && m.fire === iso(f2),
      'a claims the second fire',
    );
    // b reaches the first fire after a claimed the second (what the test needs).
    const decided = await b.event(
      (m) => (m.event === 'claimed' || m.event === 'skipped') && m.fire === iso(f1),
      'b decides about the first fire',
    );
    expect(decided.at as number).toBeGreaterThan(claimed.at as number);
    const finished = await a.event(
      (m) => m.event === 'finished' && m.fire === iso(f2),
      "a's run of the second fire ends",
      30_000,
    );
    console.log(
      `[cron replace order] a claimed the second fire ${(decided.at as number) - (claimed.at as number)} ms before b reached the first; b: ${String(decided.event)} ${(decided.reason as string | undefined) ?? ''}; a's run of the second: ${String(finished.outcome)}`,
    );
    // The later fire's run is not replaced by an earlier fire: b skips the first as superseded.
    expect(decided).toMatchObject({ event: 'skipped', reason: 'overlap', holder: 'a' });
    expect(finished.outcome).toBe('ok');
    for (const exit of await Promise.all([a, b].map((p) => p.terminate()))) {
      expect(exit).toEqual({ code: 0, signal: null });
    }
    expect((await db.rows(job)).map((r) => [r.fire, r.runner])).toEqual([[iso(f2), 'a']]);
  }, 90_000);
});
