import { setTimeout as sleep } from 'node:timers/promises';
import { isLeaseLostError, type Leasehold, type Session } from '@leasehold/core';
import {
  checkOnRead,
  closedSignal,
  counter,
  describeValue as describe,
  kvCall,
} from '@leasehold/core/internal';
import {
  jobKeys,
  recordError,
  replacerOf,
  type HistoryEntry,
  type JobKeys,
  type RunOutcome,
} from './claims.js';
import { Claimer, type Claim } from './claimer.js';
import {
  InvalidArgumentError,
  LeaseAtRiskError,
  MaxRunTimeError,
  RunReplacedError,
  SchedulerStoppedError,
  isMaxRunTimeError,
  isRunReplacedError,
  isSchedulerStoppedError,
} from './errors.js';
import {
  Listeners,
  type ClaimedEvent,
  type ErrorEvent,
  type FinishedEvent,
  type LostEvent,
  type SkippedEvent,
  type StartedEvent,
} from './events.js';
import { parseSchedule, planWake, type Attempt, type Fires, type ScheduleSpec } from './fires.js';
import { announcementKey, type Announcement } from './inspect.js';
import {
  defaults,
  invalid,
  jobSettings,
  limits,
  optionsObject,
  schedulerSettings,
  validateDrainMs,
  validateLimit,
  type JobOptions,
  type JobSettings,
  type SchedulerOptions,
} from './options.js';

/** How often a claim waiting for its lease's renewal looks again. */
const RENEWAL_POLL_MS = 50;

/** What a run gets. */
export interface RunContext {
  /**
   * The claim's fencing token (its etcd create revision): send it with every write the run makes
   * to a fenced store. Unique per fire, so it is also an idempotency key.
   */
  token: bigint;
  /**
   * Aborts when the runner's lease is lost (`LeaseLostError`), the run passes `maxRunMs`
   * (`MaxRunTimeError`) or the scheduler is stopped (`SchedulerStoppedError`). Reading it checks
   * the lease's deadline first, so the first read after a stall already sees a loss.
   */
  signal: AbortSignal;
  /** The fire's instant, as the schedule computes it (the same on every replica). */
  fireTime: Date;
  /** The job, as named in `schedule()`. */
  job: string;
  /** `'scheduled'`, or `'catch-up'` for a missed fire run under `misfire: 'run-once'`. */
  attempt: Attempt;
}

/**
 * A job's work, run once per fire on the replica that claimed it. It should stop when
 * `context.signal` aborts; what it returns is ignored, what it throws is recorded as the run's
 * `'error'` outcome.
 */
export type JobRun = (context: RunContext) => unknown;

interface JobState {
  name: string;
  keys: JobKeys;
  spec: ScheduleSpec;
  fires: Fires;
  run: JobRun;
  settings: JobSettings;
  /** The latest fire handled (claimed, missed or passed); the next wake looks after it. */
  afterMs: number | undefined;
  /** The lease the job's schedule was last announced on (see `inspectJobs`). */
  announcedOn?: bigint;
  timer: NodeJS.Timeout | undefined;
}

interface ActiveRun {
  job: string;
  fireTime: Date;
  token: bigint;
  /** Aborts the run's signal (`overlap: 'replace'`: a later fire of the job was claimed here). */
  replace: (by: RunReplacedError) => void;
}

/**
 * Creates a scheduler on `client`: jobs scheduled on it run once per fire across every replica
 * that schedules the same job under the same `prefix`. Checks the options, and that the runner's
 * lease is live (granting the client's shared session if it has none yet).
 *
 * @throws {@link InvalidArgumentError} for a `client` that is not a leasehold client or an option
 *   that is not allowed; the shared session's failure (core's `ConnectError`, `LeaseLostError`, ...)
 *   if it cannot be granted, or the given `session`'s loss.
 *
 * @example
 * ```ts
 * const scheduler = await createScheduler(client, { prefix: '/myapp/cron/' });
 * process.once('SIGTERM', () => void scheduler.stop({ drainMs: 30_000 }));
 * ```
 */
export async function createScheduler(
  client: Leasehold,
  options?: SchedulerOptions,
): Promise<Scheduler> {
  if (
    typeof client !== 'object' ||
    client === null ||
    typeof (client as Partial<Leasehold>).sharedSession !== 'function'
  ) {
    throw invalid('client', 'a Leasehold client from connect()', client);
  }
  const settings = schedulerSettings(options);
  if (settings.session) settings.session.throwIfLost();
  else await client.sharedSession();
  return new Scheduler(client, settings);
}

/**
 * Runs scheduled jobs, each fire on one replica: the one whose claim transaction creates the
 * fire's record. See the package README for how fire identity, claims, tokens and retention work.
 */
export class Scheduler implements AsyncDisposable {
  readonly #client: Leasehold;
  readonly #settings: ReturnType<typeof schedulerSettings>;
  readonly #claimer: Claimer;
  readonly #jobs = new Map<string, JobState>();
  readonly #stop = new AbortController();
  /** Every fire being claimed or run: what `stop()` drains. */
  readonly #inflight = new Set<Promise<void>>();
  readonly #active = new Set<ActiveRun>();
  #stopping: Promise<void> | undefined;
  readonly #claimed = new Listeners<ClaimedEvent>();
  readonly #skipped = new Listeners<SkippedEvent>();
  readonly #started = new Listeners<StartedEvent>();
  readonly #finished = new Listeners<FinishedEvent>();
  readonly #lost = new Listeners<LostEvent>();
  readonly #errors = new Listeners<ErrorEvent>();
  readonly #runs: (attributes: { job: string; outcome: RunOutcome }) => void;

  /** @internal Use {@link createScheduler}. */
  constructor(client: Leasehold, settings: ReturnType<typeof schedulerSettings>) {
    this.#client = client;
    this.#runs = counter(client, 'leasehold.cron.runs', {
      description: 'Runs of scheduled jobs on this replica, by job and outcome',
      unit: '{run}',
    });
    this.#settings = settings;
    this.#claimer = new Claimer(client, settings.runner, settings.now, settings.maxClockSkewMs);
    // A closed client can claim nothing more: stop, so the timers let the process exit.
    const onClose = () => void this.stop({ drainMs: 0 }).catch(() => undefined);
    const closed = closedSignal(client);
    if (closed.aborted) onClose();
    else closed.addEventListener('abort', onClose, { once: true });
  }

  /** The key prefix of this scheduler's claims and records. */
  get prefix(): string {
    return this.#settings.prefix;
  }

  /** The name recorded as runner of this scheduler's claims. */
  get runner(): string {
    return this.#settings.runner;
  }

  /**
   * Schedules `run` to run once per fire of `schedule` across every replica that schedules the
   * same `job` under the same prefix. Throws `InvalidArgumentError` for a bad name, expression,
   * time zone or option, or a job already scheduled here; `SchedulerStoppedError` after `stop()`.
   * The timer keeps the process alive until `stop()`.
   *
   * @example
   * ```ts
   * scheduler.schedule('reports/daily', '30 6 * * *', async ({ token, signal, fireTime }) => {
   *   await writeReport(fireTime, { token, signal }); // fenced by `token`
   * }, { timeZone: 'Europe/Berlin', maxRunMs: 10 * 60_000 });
   *
   * scheduler.schedule('heartbeat', { everyMs: 60_000 }, ({ token }) => ping(token));
   * ```
   */
  schedule(job: string, schedule: ScheduleSpec, run: JobRun, options?: JobOptions): void {
    if (this.#stop.signal.aborted) throw new SchedulerStoppedError();
    const keys = jobKeys(this.#settings.prefix, job);
    if (this.#jobs.has(job)) {
      throw new InvalidArgumentError(
        `job ${describe(job)} is already scheduled on this scheduler; give each job its own name`,
      );
    }
    if (typeof run !== 'function') throw invalid('run', 'a function ({ token, signal }) => …', run);
    const settings = jobSettings(
      options,
      typeof schedule === 'string',
      this.#settings.maxClockSkewMs,
    );
    const fires = parseSchedule(schedule, settings.timeZone, this.#nowMs());
    const state: JobState = {
      name: job,
      keys,
      spec: schedule,
      fires,
      run,
      settings,
      afterMs: undefined,
      timer: undefined,
    };
    this.#jobs.set(job, state);
    this.#wake(state);
  }

  /** The next fire of `job` this replica will consider, or `undefined` if it never fires again. */
  next(job: string): Date | undefined {
    const state = this.#job(job);
    const next = state.fires.next(Math.max(this.#nowMs(), state.afterMs ?? -Infinity));
    return next === undefined ? undefined : new Date(next);
  }

  /**
   * The newest records of `job` (any job under this prefix, scheduled here or not), newest
   * first: fire time, token, runner, attempt, outcome and duration. One linearizable read.
   *
   * `limit`: how many records, 1 to 10 000; default 20.
   */
  async history(job: string, options?: { limit?: number }): Promise<HistoryEntry[]> {
    const keys = jobKeys(this.#settings.prefix, job);
    const o = optionsObject(options, ['limit']);
    const limit = validateLimit(o.limit, defaults.historyLimit, limits.maxHistoryLimit);
    return this.#claimer.history(job, keys, limit);
  }

  /** This replica claimed a fire. */
  onClaimed(listener: (event: ClaimedEvent) => void): Disposable {
    return this.#claimed.add(listener);
  }

  /** This replica did not run a fire, and why. */
  onSkipped(listener: (event: SkippedEvent) => void): Disposable {
    return this.#skipped.add(listener);
  }

  /** A run started. */
  onStarted(listener: (event: StartedEvent) => void): Disposable {
    return this.#started.add(listener);
  }

  /** A run ended (after its record was written), with its duration and outcome. */
  onFinished(listener: (event: FinishedEvent) => void): Disposable {
    return this.#finished.add(listener);
  }

  /** The runner's lease was lost during a run: its signal aborted with the `LeaseLostError`. */
  onLost(listener: (event: LostEvent) => void): Disposable {
    return this.#lost.add(listener);
  }

  /**
   * A claim or a record write failed (etcd unreachable, refused). Without listeners these become
   * process warnings with code `LEASEHOLD_CRON`; they are never dropped silently.
   */
  onError(listener: (event: ErrorEvent) => void): Disposable {
    return this.#errors.add(listener);
  }

  /**
   * Stops claiming, aborts the `signal` of every run (`SchedulerStoppedError`), and waits up to
   * `drainMs` (default 10 000) for them to return and their records to be written. A run still
   * going after that keeps its claim (and running marker) until it returns or its lease ends; a
   * process warning (`LEASEHOLD_DRAIN_TIMEOUT`) names it. Does not close the client or the
   * session. Idempotent: later calls wait for the first.
   */
  async stop(options?: { drainMs?: number }): Promise<void> {
    const drainMs = validateDrainMs(optionsObject(options, ['drainMs']).drainMs);
    this.#stopping ??= (async () => {
      this.#stop.abort(new SchedulerStoppedError());
      for (const state of this.#jobs.values()) clearTimeout(state.timer);
      let timer: NodeJS.Timeout | undefined;
      const drained = await Promise.race([
        Promise.allSettled([...this.#inflight]).then(() => true),
        new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), drainMs))),
      ]);
      clearTimeout(timer);
      if (!drained) {
        const left = [...this.#active].map((r) => `${r.job}@${r.fireTime.toISOString()}`);
        process.emitWarning(
          `@leasehold/cron: stop() waited drainMs (${drainMs} ms); runs still going keep their claims until they return: ${left.join(', ') || '(claims in flight)'}`,
          { code: 'LEASEHOLD_DRAIN_TIMEOUT' },
        );
      }
    })();
    return this.#stopping;
  }

  /** {@link Scheduler.stop} with its defaults, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  #job(job: string): JobState {
    const state = this.#jobs.get(job);
    if (!state) {
      throw new InvalidArgumentError(`job ${describe(job)} is not scheduled on this scheduler`);
    }
    return state;
  }

  #nowMs(): number {
    const now = this.#settings.now();
    const ms = now instanceof Date ? now.getTime() : NaN;
    if (!Number.isFinite(ms)) throw invalid('options.now()', 'a valid Date', now);
    return ms;
  }

  #reportError(job: string, fireMs: number | undefined, error: Error): void {
    const event = { job, error, ...(fireMs === undefined ? {} : { fireTime: new Date(fireMs) }) };
    if (this.#errors.size > 0) return this.#errors.emit(event);
    const at = fireMs === undefined ? '' : ` at ${new Date(fireMs).toISOString()}`;
    process.emitWarning(`@leasehold/cron job ${JSON.stringify(job)}${at}: ${error.message}`, {
      code: 'LEASEHOLD_CRON',
    });
  }

  /** One wake-up of a job's timer: claim what is due, report what was missed, arm the next. */
  #wake(state: JobState): void {
    state.timer = undefined;
    if (this.#stop.signal.aborted) return;
    const nowMs = this.#nowMs();
    const plan = planWake(state.fires, { nowMs, afterMs: state.afterMs, ...state.settings });
    for (const fireMs of [...plan.missed].reverse()) {
      this.#skipped.emit({ job: state.name, fireTime: new Date(fireMs), reason: 'misfire' });
    }
    // At start-up with nothing due, "now" is the point after which fires are this replica's.
    state.afterMs = plan.handledMs ?? state.afterMs ?? nowMs;
    if (state.settings.overlap === 'skip') {
      // One after the other: a fire reached late must not be skipped as overlapping the run of
      // the fire just before it, claimed in the same wake.
      let chain = Promise.resolve();
      for (const { fireMs, attempt } of plan.claims) {
        chain = chain.then(() => this.#fire(state, fireMs, attempt));
      }
      if (plan.claims.length > 0) this.#track(chain);
    } else if (state.settings.overlap === 'replace') {
      // Each fire would replace the one before: of several due at once, only the latest runs.
      const latest = plan.claims.at(-1);
      for (const { fireMs } of plan.claims.slice(0, -1)) {
        this.#skipped.emit({ job: state.name, fireTime: new Date(fireMs), reason: 'overlap' });
      }
      if (latest) this.#track(this.#fire(state, latest.fireMs, latest.attempt));
    } else {
      for (const claim of plan.claims) this.#track(this.#fire(state, claim.fireMs, claim.attempt));
    }
    const next = state.fires.next(Math.max(nowMs, state.afterMs));
    if (next === undefined) return;
    // The wall clock is read again at the wake: a timer that fires early just re-arms.
    const delay = Math.min(Math.max(0, next - nowMs), limits.maxTimerMs);
    state.timer = setTimeout(() => this.#wake(state), delay);
  }

  /**
   * Writes the job's schedule where `inspectJobs` (and `leasehold inspect`) find it, on the
   * runner's lease: it goes when no replica runs the job any more. Best effort: a failure is
   * reported and retried on the next lease, never in the way of a claim.
   */
  #announce(state: JobState, session: Session): void {
    const announcement: Announcement = {
      schedule: state.spec,
      timeZone: state.settings.timeZone,
      runner: this.#settings.runner,
    };
    const key = Buffer.from(announcementKey(this.#settings.prefix, state.name, session.leaseId));
    const value = Buffer.from(JSON.stringify(announcement));
    const lease = session.leaseId.toString();
    void kvCall(
      this.#client,
      `schedule of job ${JSON.stringify(state.name)}`,
      (kv, o) => kv.put({ key, value, lease }, o),
      {
        idempotent: true,
      },
    ).catch((err: Error) => {
      state.announcedOn = undefined;
      this.#reportError(state.name, undefined, err);
    });
  }

  #track(work: Promise<void>): void {
    this.#inflight.add(work);
    void work.finally(() => this.#inflight.delete(work));
  }

  /** The runner's lease: the given session, or the client's shared one (granted anew if lost). */
  async #session(): Promise<Session> {
    const given = this.#settings.session;
    given?.throwIfLost();
    const session = given ?? (await this.#client.sharedSession(this.#stop.signal));
    // Keepalives go out every third of the TTL: less than that left means they are late (this
    // process just woke from a stall: the next answer comes within moments) or failing (a claim
    // made now would likely end `lost` at once, taking the fire from replicas that could run
    // it). Wait for a renewal while the lease lasts; claim nothing on a lease that gets none.
    const healthy = () => session.timeLeftMs() >= (session.ttlSeconds * 1000) / 3;
    const until = performance.now() + session.timeLeftMs();
    while (!healthy() && !session.isLost && performance.now() < until) {
      await sleep(RENEWAL_POLL_MS, undefined, { signal: this.#stop.signal });
    }
    if (!healthy()) throw new LeaseAtRiskError(session.leaseId, session.timeLeftMs());
    return session;
  }

  async #fire(state: JobState, fireMs: number, attempt: Attempt): Promise<void> {
    const { settings, name: job } = state;
    try {
      if (settings.startJitterMs > 0) {
        await sleep(Math.random() * settings.startJitterMs, undefined, {
          signal: this.#stop.signal,
        });
      }
      if (this.#stop.signal.aborted) return;
      const session = await this.#session();
      if (this.#stop.signal.aborted) return;
      if (state.announcedOn !== session.leaseId) {
        state.announcedOn = session.leaseId;
        this.#announce(state, session);
      }
      const { result, claim } = await this.#claimer.claim({
        job,
        keys: state.keys,
        fireMs,
        attempt,
        overlap: settings.overlap,
        retentionSeconds: settings.retentionSeconds,
        session,
      });
      const fireTime = new Date(fireMs);
      if (result.kind === 'too-late') {
        // Planned in time, but the claim could not be sent before a record of the fire made by
        // another replica may expire (a stall, a long start jitter): it is missed here.
        return this.#skipped.emit({ job, fireTime, reason: 'misfire' });
      }
      if (!claim) {
        const reason = result.kind === 'overlap' ? 'overlap' : 'claimed-elsewhere';
        const holder = result.kind === 'claimed' ? undefined : result.holder;
        return this.#skipped.emit({ job, fireTime, reason, ...(holder ? { holder } : {}) });
      }
      this.#claimed.emit({ job, fireTime, token: claim.token, attempt });
      if (settings.overlap === 'replace') {
        // This replica's own older runs of the job learn it at once, not at their next check.
        const by = {
          fireTime: claim.record.fireTime,
          runner: this.#settings.runner,
          token: claim.token,
        };
        for (const run of this.#active) {
          if (run.job === job && run.token < claim.token) {
            run.replace(new RunReplacedError(job, run.fireTime, by));
          }
        }
      }
      if (this.#stop.signal.aborted) {
        // Stopped while claiming: the job function must not run after stop() has returned.
        const ended = { outcome: 'stopped' as const, durationMs: 0 };
        return await this.#claimer.finish(claim, ended, (e) => this.#reportError(job, fireMs, e));
      }
      await this.#run(state, claim, session);
    } catch (err) {
      if (this.#stop.signal.aborted && isSchedulerStoppedError(err)) return;
      if ((err as Error)?.name === 'AbortError' && this.#stop.signal.aborted) return;
      this.#reportError(job, fireMs, err as Error);
    }
  }

  async #run(state: JobState, claim: Claim, session: Session): Promise<void> {
    const { name: job, settings } = state;
    const fireTime = new Date(claim.fireMs);
    const base = { job, fireTime, token: claim.token, attempt: claim.attempt };
    const controller = new AbortController();
    // Each read of the run's signal reads the session's first, which trips it past its deadline.
    const signal = checkOnRead(controller.signal, () => void session.signal.aborted);
    let running = false;
    const onLost = () => {
      const error = session.signal.reason as Error;
      if (!controller.signal.aborted) controller.abort(error);
      if (running) this.#lost.emit({ ...base, error });
    };
    const onStop = () => controller.abort(this.#stop.signal.reason);
    session.signal.addEventListener('abort', onLost, { once: true });
    this.#stop.signal.addEventListener('abort', onStop, { once: true });
    const maxRun =
      settings.maxRunMs === undefined
        ? undefined
        : setTimeout(
            () => controller.abort(new MaxRunTimeError(job, fireTime, settings.maxRunMs!)),
            settings.maxRunMs,
          );
    // Once the job has returned, a replacement learnt late (a marker read still in flight) must
    // not abort its signal: the run ended as it did, and its outcome says so.
    let returned = false;
    const active: ActiveRun = {
      job,
      fireTime,
      token: claim.token,
      replace: (by) => {
        if (!returned && !controller.signal.aborted) controller.abort(by);
      },
    };
    this.#active.add(active);
    // An adopted claim whose marker a later claim had rewritten: replaced before it could start.
    // Not when the runner's lease is gone: the marker on it went too, and the run is lost.
    if (claim.replacedBy && !session.signal.aborted) {
      active.replace(new RunReplacedError(job, fireTime, claim.replacedBy));
    }
    const replaceCheck =
      settings.overlap === 'replace' ? this.#watchReplaced(claim, active) : undefined;
    const startedAt = performance.now();
    let threw = false;
    let error: unknown;
    try {
      // Reading the session's signal checks its deadline: a claim won by a process that stalled
      // past its lease (the claim key may already be gone) never starts.
      if (session.signal.aborted) {
        controller.abort(session.signal.reason);
        this.#lost.emit({ ...base, error: session.signal.reason as Error });
      } else if (controller.signal.aborted && isRunReplacedError(controller.signal.reason)) {
        // A later fire of the job was claimed before this run could start: it never starts.
      } else {
        if (this.#stop.signal.aborted) onStop();
        running = true;
        this.#started.emit(base);
        try {
          await state.run({ ...base, signal });
        } catch (err) {
          threw = true;
          error = err;
        }
      }
    } finally {
      running = false;
      returned = true;
      clearTimeout(maxRun);
      if (replaceCheck) clearInterval(replaceCheck);
      session.signal.removeEventListener('abort', onLost);
      this.#stop.signal.removeEventListener('abort', onStop);
    }
    const durationMs = performance.now() - startedAt;
    const outcome: RunOutcome = controller.signal.aborted
      ? outcomeOf(controller.signal.reason)
      : threw
        ? 'error'
        : 'ok';
    if (outcome !== 'error' && outcome !== 'ok') error = controller.signal.reason;
    const text = recordError(error);
    await this.#claimer.finish(
      claim,
      { outcome, durationMs, ...(text === undefined ? {} : { error: text }) },
      (err) => this.#reportError(job, claim.fireMs, err),
    );
    this.#active.delete(active);
    this.#runs({ job, outcome });
    this.#finished.emit({
      ...base,
      durationMs,
      outcome,
      ...(error === undefined ? {} : { error }),
    });
  }

  /**
   * Under `overlap: 'replace'`: reads the job's running marker every `limits.replaceCheckMs`,
   * and aborts the run's signal with `RunReplacedError` once a later claim (on any replica)
   * rewrote it. A failed read is tried again at the next tick (the run's own lease and fencing
   * token still protect what it writes) and reported through `onError` once until one succeeds.
   */
  #watchReplaced(claim: Claim, active: ActiveRun): NodeJS.Timeout {
    let reading = false;
    let failing = false;
    return setInterval(() => {
      if (reading) return;
      reading = true;
      this.#claimer
        .current(claim)
        .then(({ current, by }) => {
          failing = false;
          if (current) return;
          active.replace(new RunReplacedError(claim.job, active.fireTime, replacerOf(by)));
        })
        .catch((err: Error) => {
          if (failing) return;
          failing = true;
          this.#reportError(claim.job, claim.fireMs, err);
        })
        .finally(() => (reading = false));
    }, limits.replaceCheckMs);
  }
}

function outcomeOf(reason: unknown): RunOutcome {
  if (isMaxRunTimeError(reason)) return 'timed-out';
  if (isRunReplacedError(reason)) return 'replaced';
  if (isSchedulerStoppedError(reason)) return 'stopped';
  if (isLeaseLostError(reason)) return 'lost';
  return 'stopped';
}
