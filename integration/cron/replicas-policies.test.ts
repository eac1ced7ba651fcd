/**
 * @leasehold/cron's overlap and misfire policies between real processes on the run's etcd:
 * `overlap: 'skip' | 'replace'` across replicas, misfires at start-up and after a stall
 * (SIGSTOP). Every run writes one row through @leasehold/fence into PostgreSQL, fenced by its
 * token on the resource (job, fire): what ran is counted from that table.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { waitFor } from '../setup/etcd.js';
import { describeWith, findPostgres } from '../fence/stores.js';
import { countRuns, Proc, waitForFires, type Msg, type Row } from './harness.js';
import { replicaSuite, untilPhase } from './replica-suite.js';

const postgres = await findPostgres();

describeWith(postgres, '@leasehold/cron replicas: overlap and misfire policies', (url) => {
  const { db, start, cronPrefix, historyOf } = replicaSuite(url);

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
    // The precondition of this case (a timer later than the tolerance would make it a misfire).
    expect(onTimeAge, 'the on-time replica planned within its tolerance').toBeLessThanOrEqual(
      onTimeOptions.lateToleranceMs,
    );
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
    // Resumed 1 s into a period, after at least two fires came and went: the phase is taken
    // after the pause, so the woken replicas have a whole second before the next fire.
    await delay(Math.max(0, stoppedAt + 4500 - Date.now()));
    await delay(untilPhase(period, 1000));
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
