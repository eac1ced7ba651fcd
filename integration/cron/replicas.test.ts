/**
 * @leasehold/cron between real processes on the run's etcd: replicas are killed (SIGKILL),
 * paused (SIGSTOP), skewed (their wall clock offset by ±3 s) and stopped (SIGTERM). Every run
 * writes one row through @leasehold/fence into PostgreSQL, fenced by its token on the resource
 * (job, fire): duplicates and misses are counted from that table, where the damage would be.
 */
import { expect, it } from 'vitest';
import { waitFor } from '../setup/etcd.js';
import { describeWith, findPostgres } from '../fence/stores.js';
import { countRuns, Proc, waitForFires, type Row } from './harness.js';
import { claimedBy, replicaSuite, summary } from './replica-suite.js';

const postgres = await findPostgres();

describeWith(postgres, '@leasehold/cron replicas', (url) => {
  const { db, start, cronPrefix, historyOf } = replicaSuite(url);

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
          // by design; that policy has a test of its own in replicas-policies.test.ts.
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
});
