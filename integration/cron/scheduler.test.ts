/**
 * @leasehold/cron in one process against the run's etcd: max run time, stop() and its drain,
 * history and next, and bad input rejected with typed errors before anything is written.
 */
import type { Leasehold } from '@leasehold/core';
import {
  createScheduler,
  isInvalidArgumentError,
  isMaxRunTimeError,
  isSchedulerStoppedError,
  leaseholdRunCoordinator,
  type FinishedEvent,
  type RunContext,
  type Scheduler,
} from '@leasehold/cron';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../setup/etcd.js';
import { inProcess } from './in-process.js';

const cron = inProcess();
const { admin } = cron;
const scheduler = (label: string) => cron.scheduler(label);

const nextFinished = (s: Scheduler, job: string) =>
  new Promise<FinishedEvent>((resolve) => {
    const sub = s.onFinished((e) => {
      if (e.job !== job) return;
      sub[Symbol.dispose]();
      resolve(e);
    });
  });

/** A promise that settles with the first run's context, and lets that run end when told. */
function heldRun() {
  let started!: (ctx: RunContext) => void;
  const context = new Promise<RunContext>((resolve) => (started = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  return { context, release, run: (ctx: RunContext) => (started(ctx), released) };
}

describe('@leasehold/cron scheduler', () => {
  it('maxRunMs aborts the run signal with MaxRunTimeError; the record says timed-out', async () => {
    const s = await scheduler('max-run');
    const finished = nextFinished(s, 'bounded');
    let reason: unknown;
    s.schedule(
      'bounded',
      '* * * * * *',
      async ({ signal }) => {
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
        reason = signal.reason;
      },
      { maxRunMs: 300 },
    );
    const event = await finished;
    expect(isMaxRunTimeError(reason)).toBe(true);
    expect(event.outcome).toBe('timed-out');
    expect(event.durationMs).toBeGreaterThanOrEqual(290);
    expect(event.durationMs).toBeLessThan(2000);
    // The job fires every second: on a loaded host a later fire may be claimed (its record
    // 'running') before this read, so the run's record is found by its token.
    const entry = (await s.history('bounded', { limit: 10 })).find((e) => e.token === event.token);
    expect(entry).toMatchObject({ outcome: 'timed-out', token: event.token, runner: 'max-run' });
    expect(entry!.error).toContain('maxRunMs (300 ms)');
  });

  it('stop() stops claiming, aborts running runs and waits for them (drain)', async () => {
    const s = await scheduler('drain');
    const held = heldRun();
    const claimed: string[] = [];
    s.onClaimed((e) => claimed.push(e.fireTime.toISOString()));
    s.schedule('drained', { everyMs: 1000 }, held.run);
    const ctx = await held.context;
    expect(ctx).toMatchObject({ job: 'drained', attempt: 'scheduled' });
    expect(typeof ctx.token).toBe('bigint');
    const finished = nextFinished(s, 'drained');
    let stopped = false;
    const stopping = s.stop({ drainMs: 20_000 }).then(() => (stopped = true));
    await waitFor(() => ctx.signal.aborted, { what: 'the run signal aborts on stop()' });
    expect(isSchedulerStoppedError(ctx.signal.reason)).toBe(true);
    // stop() waits for the run to return.
    await new Promise((resolve) => setImmediate(resolve));
    expect(stopped).toBe(false);
    const claimsAtStop = claimed.length;
    held.release();
    await stopping;
    expect((await finished).outcome).toBe('stopped');
    expect(claimed.length).toBe(claimsAtStop);
    const [entry] = await s.history('drained', { limit: 1 });
    expect(entry).toMatchObject({ outcome: 'stopped', token: ctx.token });
    expect(() => s.schedule('later', '* * * * * *', () => {})).toThrow(
      expect.objectContaining({ code: 'SCHEDULER_STOPPED' }),
    );
  });

  it('stop() gives up after drainMs on a run that ignores its signal, and warns', async () => {
    const s = await scheduler('drain-timeout');
    const held = heldRun();
    s.schedule('stuck', { everyMs: 1000 }, held.run);
    await held.context;
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const t0 = performance.now();
      await s.stop({ drainMs: 300 });
      const waited = performance.now() - t0;
      expect(waited).toBeGreaterThanOrEqual(290);
      expect(waited).toBeLessThan(3000);
      await waitFor(
        () =>
          warnings.find((w) => (w as Error & { code?: string }).code === 'LEASEHOLD_DRAIN_TIMEOUT'),
        { what: 'a LEASEHOLD_DRAIN_TIMEOUT warning' },
      );
      expect(warnings.map((w) => w.message).join()).toContain('stuck@');
      // The run still holds its claim: the record says running.
      const [entry] = await s.history('stuck', { limit: 1 });
      expect(entry?.outcome).toBe('running');
    } finally {
      process.off('warning', onWarning);
      held.release();
    }
  });

  it('next() is the next fire from the expression; history() lists runs newest first', async () => {
    const s = await scheduler('history');
    const finishes: FinishedEvent[] = [];
    s.onFinished((e) => finishes.push(e));
    s.schedule('ticks', '* * * * * *', () => {}, { timeZone: 'Europe/Berlin' });
    const next = s.next('ticks')!;
    expect(next.getTime() % 1000).toBe(0);
    expect(next.getTime()).toBeGreaterThan(Date.now() - 1000);
    expect(next.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    s.schedule('daily', '30 9 * * *', () => {}, { timeZone: 'America/New_York' });
    const daily = s.next('daily')!;
    const hourInNY = new Intl.DateTimeFormat('en-US', {
      timeZone: 'America/New_York',
      hour: 'numeric',
      minute: 'numeric',
      hour12: false,
    }).format(daily);
    expect(hourInNY).toBe('09:30');
    await waitFor(() => finishes.length >= 3, { what: '3 runs' });
    const history = await s.history('ticks');
    expect(history.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < history.length; i++) {
      expect(history[i]!.fireTime.getTime()).toBeLessThan(history[i - 1]!.fireTime.getTime());
      expect(history[i]!.token).toBeLessThan(history[i - 1]!.token);
    }
    expect(history.find((h) => h.token === finishes[0]!.token)).toMatchObject({
      runner: 'history',
      outcome: 'ok',
      attempt: 'scheduled',
    });
    expect(() => s.next('unknown')).toThrow(/not scheduled/);
  });

  it('rejects invalid expressions, time zones and options with typed errors, writing nothing', async () => {
    const s = await scheduler('invalid');
    const bad: [string, () => unknown, RegExp][] = [
      [
        'expression',
        () => s.schedule('j', 'every day at noon', () => {}),
        /not a valid cron expression/,
      ],
      ['field range', () => s.schedule('j', '0 25 * * *', () => {}), /"0 25 \* \* \*"/],
      ['never fires', () => s.schedule('j', '0 0 31 2 *', () => {}), /never fires/],
      ['everyMs', () => s.schedule('j', { everyMs: 10 }, () => {}), /from 1000/],
      [
        'time zone',
        () => s.schedule('j', '* * * * *', () => {}, { timeZone: 'Europe/Atlantis' }),
        /IANA time zone/,
      ],
      [
        'zone for everyMs',
        () => s.schedule('j', { everyMs: 5000 }, () => {}, { timeZone: 'UTC' }),
        /cron expressions only/,
      ],
      [
        'overlap',
        () => s.schedule('j', '* * * * *', () => {}, { overlap: 'queue' as 'skip' }),
        /options.overlap/,
      ],
      [
        'misfire',
        () => s.schedule('j', '* * * * *', () => {}, { misfire: 'all' as 'skip' }),
        /options.misfire/,
      ],
      [
        'maxRunMs',
        () => s.schedule('j', '* * * * *', () => {}, { maxRunMs: -1 }),
        /options.maxRunMs/,
      ],
      [
        'jitter',
        () => s.schedule('j', '* * * * *', () => {}, { startJitterMs: Number.NaN }),
        /startJitterMs/,
      ],
      [
        'retention',
        () => s.schedule('j', '* * * * *', () => {}, { retentionSeconds: 10 }),
        /retentionSeconds/,
      ],
      [
        'unknown option',
        () => s.schedule('j', '* * * * *', () => {}, { jitter: 5 } as never),
        /options.jitter must be left out \(not an option/,
      ],
      ['run', () => s.schedule('j', '* * * * *', 'echo hi' as never), /run must be a function/],
      ['job name', () => s.schedule('', '* * * * *', () => {}), /job must be a non-empty string/],
      ['history limit', () => s.history('j', { limit: 0 }), /options.limit/],
    ];
    for (const [what, call, message] of bad) {
      let caught: unknown;
      try {
        await call();
      } catch (err) {
        caught = err;
      }
      expect(isInvalidArgumentError(caught), `${what}: ${String(caught)}`).toBe(true);
      expect((caught as Error).message, what).toMatch(message);
      expect((caught as Error).name).toBe('InvalidArgumentError');
    }
    s.schedule('dup', '0 0 1 1 *', () => {});
    expect(() => s.schedule('dup', '0 0 1 1 *', () => {})).toThrow(/already scheduled/);
    await expect(createScheduler(cron.client, { prefix: '' })).rejects.toSatisfy(
      isInvalidArgumentError,
    );
    await expect(createScheduler(cron.client, { now: 5 as never })).rejects.toSatisfy(
      isInvalidArgumentError,
    );
    await expect(createScheduler({} as Leasehold)).rejects.toSatisfy(isInvalidArgumentError);
    expect(() => leaseholdRunCoordinator(cron.client, { overlap: 'x' as 'skip' })).toThrow(
      /options.overlap/,
    );
    // Nothing was claimed for any rejected job.
    const keys = await admin.getAll().prefix(s.prefix).keys();
    expect(keys).toEqual([]);
  });
});
