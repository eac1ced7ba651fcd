/**
 * The scheduler on a memory client: its claims and record writes go to an etcd in memory whose
 * faults and clock the test controls. The schedule itself runs on real timers (fires at whole
 * periods of the wall clock), so each wait below is for an event, with a deadline counted in
 * periods.
 */
import { isLeaseLostError } from '@leasehold/core';
import { callTimeoutMs } from '@leasehold/core/internal';
import { memoryClient, memoryEtcd } from '@leasehold/testing/memory';
import { expect, it } from 'vitest';
import { RunReplacedError } from './errors.js';
import type { ClaimedEvent, FinishedEvent, LostEvent, StartedEvent } from './events.js';
import { limits } from './options.js';
import { createScheduler, type Scheduler } from './scheduler.js';

/** The shortest `{ everyMs }` period: fires come on each whole second of the wall clock. */
const PERIOD_MS = limits.minEveryMs;
/**
 * More than the sum of the deadlines of any one test's waits (at most 12 periods): a slow host
 * fails a test at the wait that missed, with its message, never at vitest's 5 s default.
 */
const TEST_TIMEOUT_MS = 15 * PERIOD_MS;

type Logged =
  | ({ kind: 'claimed' } & ClaimedEvent)
  | ({ kind: 'started' } & StartedEvent)
  | ({ kind: 'finished' } & FinishedEvent);

/**
 * Every claimed, started and finished event of `scheduler`, and `until`: the first logged event
 * that `match` accepts, once it comes. The n-th fire from now comes within n periods; the deadline
 * allows one more, for timers a busy host runs late.
 */
function eventsOf(scheduler: Scheduler) {
  const log: Logged[] = [];
  const waiters = new Set<() => void>();
  const add = (event: Logged) => {
    log.push(event);
    for (const wake of waiters) wake();
  };
  scheduler.onClaimed((e) => add({ kind: 'claimed', ...e }));
  scheduler.onStarted((e) => add({ kind: 'started', ...e }));
  scheduler.onFinished((e) => add({ kind: 'finished', ...e }));
  function until<K extends Logged['kind']>(
    kind: K,
    match: (event: Extract<Logged, { kind: K }>) => boolean,
    periods: number,
  ): Promise<Extract<Logged, { kind: K }>> {
    const find = () =>
      log.find((e): e is Extract<Logged, { kind: K }> => e.kind === kind && match(e as never));
    const deadlineMs = (periods + 1) * PERIOD_MS;
    return new Promise((resolve, reject) => {
      const wake = () => {
        const found = find();
        if (!found) return;
        waiters.delete(wake);
        clearTimeout(timer);
        resolve(found);
      };
      const timer = setTimeout(() => {
        waiters.delete(wake);
        reject(new Error(`no ${kind} event as expected within ${deadlineMs} ms`));
      }, deadlineMs);
      waiters.add(wake);
      wake();
    });
  }
  return { log, until };
}

interface Run {
  token: bigint;
  returned: boolean;
  /** Why its signal aborted, and whether the job function had returned by then. */
  abort?: { reason: unknown; afterReturn: boolean };
}

const aborted = (signal: AbortSignal) =>
  new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));

/**
 * A scheduler on a fresh memory etcd that runs job "job" every period under overlap 'replace',
 * logging each run and its signal's abort (and whether the job had returned by then). `work` is
 * the job's body for its `n`-th run (from 1).
 */
async function replacing(work: (n: number, signal: AbortSignal) => Promise<void>) {
  const etcd = memoryEtcd();
  const client = await memoryClient({ etcd });
  const scheduler = await createScheduler(client, { prefix: '/cron/', runner: 'r' });
  const events = eventsOf(scheduler);
  const runs: Run[] = [];
  const errors: Error[] = [];
  scheduler.onError((e) => errors.push(e.error));
  scheduler.schedule(
    'job',
    { everyMs: PERIOD_MS },
    async ({ signal, token }) => {
      const run: Run = { token, returned: false };
      runs.push(run);
      signal.addEventListener(
        'abort',
        () => (run.abort = { reason: signal.reason, afterReturn: run.returned }),
        { once: true },
      );
      try {
        await work(runs.length, signal);
      } finally {
        run.returned = true;
      }
    },
    { overlap: 'replace', retentionSeconds: 60 },
  );
  return { etcd, client, scheduler, events, runs, errors };
}

it(
  "overlap 'replace': a run whose job returned keeps its signal and outcome when the next fire is claimed while its record write is in flight; a run still going is replaced",
  async () => {
    const { etcd, client, scheduler, events, runs, errors } = await replacing(async (n, signal) => {
      if (n === 1) {
        // The first run returns at once, and its record write (the client's next KV call) gets
        // no answer until the test moves etcd's clock: the run stays the scheduler's until then.
        etcd.faults.hangNext({ only: 'kv' });
        return;
      }
      // The second goes on until its signal aborts; the later ones return at once.
      if (n === 2) await aborted(signal);
    });
    try {
      const first = await events.until('started', () => true, 1);
      const firstEnded = () =>
        events.log.some((e) => e.kind === 'finished' && e.token === first.token);

      // The next fire is claimed while the first run's record write hangs: the scheduler, which
      // tells its own older runs of a replacing claim at once, still counts the first run as its.
      const second = await events.until('claimed', (e) => e.token > first.token, 2);
      expect(firstEnded(), "the first run's record write is in flight").toBe(false);
      await events.until('started', (e) => e.token === second.token, 0);

      // The fire after replaces the second run, still going: its signal aborts as that claim lands.
      const third = await events.until('claimed', (e) => e.token > second.token, 2);
      const going = runs.find((r) => r.token === second.token)!;
      expect(going.abort?.reason).toBeInstanceOf(RunReplacedError);
      expect((going.abort?.reason as RunReplacedError).by.token).toBe(third.token);
      expect(going.abort?.afterReturn).toBe(false);
      const goingEnded = await events.until('finished', (e) => e.token === second.token, 0);
      expect(goingEnded.outcome).toBe('replaced');

      // The first run had returned: no replacement aborts its signal, before or after its record
      // is written (the hung call's deadline passes on etcd's clock, and it is sent again).
      const returned = runs.find((r) => r.token === first.token)!;
      expect(returned.returned).toBe(true);
      expect(returned.abort, 'the returned run was aborted').toBeUndefined();
      expect(firstEnded(), "the first run's record write is in flight").toBe(false);
      await etcd.clock.advance(callTimeoutMs(client));
      const ended = await events.until('finished', (e) => e.token === first.token, 0);
      expect(ended.outcome).toBe('ok');
      expect(returned.abort, 'the returned run was aborted').toBeUndefined();
      const history = await scheduler.history('job');
      expect(history.find((h) => h.token === first.token)?.outcome).toBe('ok');
      expect(history.find((h) => h.token === second.token)?.outcome).toBe('replaced');
      expect(errors).toEqual([]);
    } finally {
      await scheduler.stop({ drainMs: 0 });
      await client.close();
    }
  },
  TEST_TIMEOUT_MS,
);

it(
  "overlap 'replace': a claim whose answer was lost, adopted on its retry after the next fire replaced it, never starts its run",
  async () => {
    const { etcd, client, scheduler, events, runs, errors } = await replacing(async (n, signal) => {
      // The first run returns at once; the next goes on until its signal aborts.
      if (n > 1) await aborted(signal);
    });
    try {
      // Once the first run is recorded, the client's next KV call is the next fire's claim: etcd
      // applies it and never answers, until its deadline passes on etcd's clock.
      const first = await events.until('finished', () => true, 1);
      etcd.faults.hangNext({ only: 'kv', applied: true });

      // The fire after is claimed meanwhile: it replaces the marker of the landed claim, and runs.
      const later = await events.until('claimed', (e) => e.fireTime > first.fireTime, 3);
      await events.until('started', (e) => e.token === later.token, 0);
      const landed = (await scheduler.history('job')).filter(
        (h) => h.token > first.token && h.token < later.token,
      );
      expect(landed.map((h) => h.outcome)).toEqual(['running']);
      const lost = landed[0]!;

      // Its retry finds the record it wrote and adopts it: replaced before it started, it never
      // starts, and is recorded as replaced by the run going on, which goes on.
      await etcd.clock.advance(callTimeoutMs(client));
      const ended = await events.until('finished', (e) => e.token === lost.token, 0);
      expect(
        events.log.some((e) => e.kind === 'started' && e.token === lost.token),
        'the adopted run started',
      ).toBe(false);
      expect(runs.map((r) => r.token)).not.toContain(lost.token);
      expect(ended.outcome).toBe('replaced');
      expect((ended.error as RunReplacedError).by.token).toBe(later.token);
      expect(runs.find((r) => r.token === later.token)?.abort).toBeUndefined();
      const history = await scheduler.history('job');
      expect(history.find((h) => h.token === lost.token)?.outcome).toBe('replaced');
      expect(history.find((h) => h.token === later.token)?.outcome).toBe('running');
      expect(errors).toEqual([]);
    } finally {
      await scheduler.stop({ drainMs: 0 });
      await client.close();
    }
  },
  TEST_TIMEOUT_MS,
);

it(
  "overlap 'replace': a claim whose answer was lost, adopted on its retry after its runner's lease ended (taking the running marker with it), ends 'lost', not replaced",
  async () => {
    const etcd = memoryEtcd();
    const client = await memoryClient({ etcd });
    const session = await client.session();
    const scheduler = await createScheduler(client, { prefix: '/cron/', runner: 'r', session });
    const events = eventsOf(scheduler);
    const lost: LostEvent[] = [];
    scheduler.onLost((e) => lost.push(e));
    const ran: bigint[] = [];
    scheduler.schedule('job', { everyMs: PERIOD_MS }, ({ token }) => void ran.push(token), {
      overlap: 'replace',
      retentionSeconds: 60,
    });
    try {
      // Once the first run is recorded, the client's next KV call is the next fire's claim: etcd
      // applies it and never answers, until its deadline passes on etcd's clock.
      const first = await events.until('finished', () => true, 1);
      etcd.faults.hangNext({ only: 'kv', applied: true });
      // The claim lands (its record, claim key and running marker are written) but is not answered.
      const landedRecord = () =>
        etcd.keys('/cron/job/fire/').find((k) => k.createRevision > first.token);
      for (let i = 0; !landedRecord() && i < 3 * PERIOD_MS; i += 10) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const record = landedRecord();
      expect(record && JSON.parse(record.value)).toMatchObject({ state: 'running' });
      const token = record!.createRevision;
      expect(etcd.get('/cron/job/running')?.modRevision).toBe(token);

      // The runner's lease ends while the claim's answer is awaited: its claim key and running
      // marker go with it. No later fire is claimed on the lease etcd no longer has.
      expect(etcd.revokeLease(session.leaseId)).toBe(true);
      await etcd.clock.advance(callTimeoutMs(client));
      const ended = await events.until('finished', (e) => e.token === token, 0);
      expect(ran).not.toContain(token);
      expect(ended.outcome).toBe('lost');
      expect(isLeaseLostError(ended.error)).toBe(true);
      expect(lost.map((e) => e.token)).toEqual([token]);
      const history = await scheduler.history('job');
      expect(history.find((h) => h.token === token)?.outcome).toBe('lost');
    } finally {
      await scheduler.stop({ drainMs: 0 });
      await client.close();
    }
  },
  TEST_TIMEOUT_MS,
);
