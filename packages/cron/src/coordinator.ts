/**
 * A node-cron 4.x `RunCoordinator` backed by leasehold's claims. node-cron calls, for each fire
 * of a task with `distributed: true`, `shouldRun('<task name>:<fire slot ISO time>', ttlMs)` and
 * runs the task only if it resolves `true`, then `onComplete(key)`. Here `shouldRun` is the same
 * claim transaction the scheduler makes (job = task name, fire = the slot), so each fire runs on
 * one instance, and `onComplete` records the run and ends the claim while the record stays.
 */
import { hostname } from 'node:os';
import type { Leasehold, Session } from '@leasehold/core';
import { counter } from '@leasehold/core/internal';
import type { HistoryEntry, RunOutcome } from './claims.js';
import { jobKeys, recordError } from './claims.js';
import { Claimer, type Claim } from './claimer.js';
import { Listeners, type ErrorEvent } from './events.js';
import {
  defaults,
  encodeJob,
  invalid,
  limits,
  optionsObject,
  validateLimit,
  validatePrefix,
  validateSkewMs,
} from './options.js';

/** The shape node-cron 4.x expects (its own `RunCoordinator` type, restated: no node-cron types). */
export interface RunCoordinator {
  /**
   * Whether this instance runs the fire `key` (`<task name>:<fire slot as ISO 8601>`); `ttlMs` is
   * how long the claim must last (node-cron's `distributedLease`).
   */
  shouldRun(key: string, ttlMs: number): boolean | Promise<boolean>;
  /** Called by node-cron once the fire `key` this instance ran has ended. */
  onComplete?(key: string): void | Promise<void>;
}

/** Options of {@link leaseholdRunCoordinator}; every field is optional. */
export interface RunCoordinatorOptions {
  /** Key prefix of claims and records; the scheduler's default. Default `/leasehold/cron/`. */
  prefix?: string;
  /** The runner's lease. Default: the client's shared session. */
  session?: Session;
  /** The name recorded as runner. Default `hostname:pid`. */
  runner?: string;
  /**
   * `'allow'` (default, as node-cron's own default): fires of a task may run at once on different
   * instances. `'skip'`: a fire is refused while the task's previous fire runs on any instance.
   */
  overlap?: 'allow' | 'skip';
  /**
   * How long each fire's record is kept, in whole seconds; at least node-cron's `ttlMs`
   * (`distributedLease`) in any case. Default 86400.
   */
  retentionSeconds?: number;
  /**
   * The most instances' clocks may disagree, in milliseconds: a fire older than retention less
   * this (by this instance's clock) is not claimed, since another instance's record of it may
   * be gone. Default 10 000.
   */
  maxClockSkewMs?: number;
}

/**
 * What `track()` needs of a node-cron 4 `ScheduledTask` (restated: no node-cron types): its
 * name and its execution events, which node-cron emits before it calls `onComplete`.
 */
export interface TrackedTask {
  /** The task's name: the first part of its coordination keys. */
  name?: string;
  /** Starts calling `listener` when a run of the task finishes or fails. */
  on(
    event: 'execution:finished' | 'execution:failed',
    listener: (context: TaskContext) => void,
  ): unknown;
  /** Stops calling `listener`. */
  off(
    event: 'execution:finished' | 'execution:failed',
    listener: (context: TaskContext) => void,
  ): unknown;
}

/** The part of node-cron's `TaskContext` that tells which fire ended how. */
export interface TaskContext {
  /** The fire slot the run was for. */
  date: Date;
  /** The run. */
  execution?: {
    /** What the run threw, on `execution:failed`. */
    error?: unknown;
  };
}

/** A claim this instance holds for a fire it is running. */
export interface CoordinatedClaim {
  /** The claim's fencing token: pass it with the task's writes to a fenced store. */
  token: bigint;
  /** The runner's lease signal: aborts when the lease is lost. */
  signal: AbortSignal;
}

/**
 * The coordinator {@link leaseholdRunCoordinator} returns: node-cron's {@link RunCoordinator}, and
 * what leasehold adds (tokens, history, outcomes, errors).
 */
export interface LeaseholdRunCoordinator extends RunCoordinator {
  /**
   * Claims the fire `key` (`<task name>:<fire slot as ISO 8601>`) for this instance: resolves
   * `true` if it got the claim and should run the task, `false` if another instance has it (or,
   * with `overlap: 'skip'`, a previous fire still runs). Throws `InvalidArgumentError` for a key or
   * `ttlMs` node-cron would not give.
   */
  shouldRun(key: string, ttlMs: number): Promise<boolean>;
  /**
   * Records how the run of `key` ended (see `track()`) and ends its claim; the record stays for the
   * retention time, so a late instance does not run the fire again.
   */
  onComplete(key: string): Promise<void>;
  /**
   * The claim this instance holds for task `name`'s fire at `fireTime` (node-cron passes it as
   * `context.date`), while the task runs; `undefined` otherwise.
   */
  claimOf(name: string, fireTime: Date): CoordinatedClaim | undefined;
  /** The newest records of a task, as `scheduler.history()`. */
  history(name: string, options?: { limit?: number }): Promise<HistoryEntry[]>;
  /**
   * Records each run's real outcome for `task` (`'ok'`, or `'error'` with what it threw) instead
   * of `'completed'`: listens to the task's `execution:finished` and `execution:failed`. Without
   * it, node-cron tells the coordinator only that a run ended. Disposing stops listening.
   */
  track(task: TrackedTask): Disposable;
  /** A claim or record write failed; without listeners, a process warning (`LEASEHOLD_CRON`). */
  onError(listener: (event: ErrorEvent) => void): Disposable;
}

/** `<task name>:<slot as Date.toISOString()>`: node-cron's key (4.6: `${name}:${slot.toISOString()}`). */
const KEY = /^(.+):(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)$/;

/** Splits a node-cron coordination key into task name and fire time. */
export function parseCoordinatorKey(key: unknown): { name: string; fireMs: number } {
  const match = typeof key === 'string' ? KEY.exec(key) : null;
  const fireMs = match ? Date.parse(match[2]!) : NaN;
  if (!match || !Number.isFinite(fireMs)) {
    throw invalid(
      'key',
      "node-cron's coordination key '<task name>:<fire slot as ISO 8601 UTC>', e.g. 'report:2025-01-01T00:00:00.000Z'",
      key,
    );
  }
  encodeJob(match[1], 'task name');
  return { name: match[1]!, fireMs };
}

/**
 * A node-cron 4.x `RunCoordinator` on leasehold's claims: one line moves a node-cron
 * `distributed: true` task onto etcd (`cron.setRunCoordinator(leaseholdRunCoordinator(client))`,
 * or the task's `runCoordinator` option). Claims are kept, not deleted, when a run completes:
 * an instance whose clock lags finds the record and does not run the fire again.
 *
 * @throws {@link InvalidArgumentError} for a `client` that is not a leasehold client or an option
 *   that is not allowed (see {@link RunCoordinatorOptions}).
 *
 * @example
 * ```ts
 * import cron from 'node-cron';
 *
 * const coordinator = leaseholdRunCoordinator(client);
 * cron.setRunCoordinator(coordinator); // every distributed task now claims in etcd
 * const task = cron.schedule('0 * * * *', async (ctx) => {
 *   const claim = coordinator.claimOf('sync-invoices', ctx.date); // { token, signal }
 *   await syncInvoices(claim?.token);
 * }, { name: 'sync-invoices', distributed: true });
 * coordinator.track(task); // records say 'ok' or 'error', not just 'completed'
 * ```
 */
export function leaseholdRunCoordinator(
  client: Leasehold,
  options?: RunCoordinatorOptions,
): LeaseholdRunCoordinator {
  if (
    typeof client !== 'object' ||
    client === null ||
    typeof (client as Partial<Leasehold>).sharedSession !== 'function'
  ) {
    throw invalid('client', 'a Leasehold client from connect()', client);
  }
  const o = optionsObject(
    options,
    ['prefix', 'session', 'runner', 'overlap', 'retentionSeconds', 'maxClockSkewMs'],
    'an object of coordinator options',
  ) as RunCoordinatorOptions;
  const prefix = validatePrefix(o.prefix ?? defaults.prefix);
  const overlap = o.overlap ?? 'allow';
  if (overlap !== 'allow' && overlap !== 'skip') {
    // 'replace' needs the run to be told to stop: node-cron's task has no signal of its own.
    throw invalid('options.overlap', "'allow' or 'skip'", overlap);
  }
  const retention = o.retentionSeconds ?? defaults.retentionSeconds;
  if (
    !Number.isInteger(retention) ||
    retention < limits.minRetentionSeconds ||
    retention > limits.maxRetentionSeconds
  ) {
    throw invalid(
      'options.retentionSeconds',
      `a whole number of seconds from ${limits.minRetentionSeconds} to ${limits.maxRetentionSeconds}`,
      retention,
    );
  }
  const runner = o.runner ?? undefined;
  if (runner !== undefined && (typeof runner !== 'string' || runner === '')) {
    throw invalid('options.runner', 'a non-empty string', runner);
  }
  const maxClockSkewMs = validateSkewMs(o.maxClockSkewMs);
  if (maxClockSkewMs >= retention * 1000) {
    throw invalid(
      'options.maxClockSkewMs',
      `less than retentionSeconds (${retention} s = ${retention * 1000} ms): a record must outlive the skew`,
      maxClockSkewMs,
    );
  }
  const session = o.session;
  const claimer = new Claimer(
    client,
    runner ?? `${hostname()}:${process.pid}`,
    () => new Date(),
    maxClockSkewMs,
  );
  const errors = new Listeners<ErrorEvent>();
  // Made at the first run, not here: creating a coordinator touches nothing of the client.
  let counted: ((attributes: Record<string, string>) => void) | undefined;
  const runs = (attributes: Record<string, string>) =>
    (counted ??= counter(client, 'leasehold.cron.runs', {
      description: 'Runs of scheduled jobs on this replica, by job and outcome',
      unit: '{run}',
    }))(attributes);
  const report = (job: string, fireMs: number | undefined, error: Error) => {
    const event = { job, error, ...(fireMs === undefined ? {} : { fireTime: new Date(fireMs) }) };
    if (errors.size > 0) return errors.emit(event);
    process.emitWarning(
      `@leasehold/cron coordinator, task ${JSON.stringify(job)}: ${error.message}`,
      {
        code: 'LEASEHOLD_CRON',
      },
    );
  };
  /** Claims asked for or held by this instance, by key: one instance never claims a key twice. */
  const claims = new Map<
    string,
    | {
        claim?: Claim;
        session?: Session;
        startedAt: number;
        /** Set by a tracked task's events, before node-cron calls onComplete. */
        ended?: { outcome: RunOutcome; error?: string };
      }
    | undefined
  >();

  return {
    async shouldRun(key, ttlMs) {
      const { name, fireMs } = parseCoordinatorKey(key);
      if (typeof ttlMs !== 'number' || !(ttlMs > 0) || !Number.isFinite(ttlMs)) {
        throw invalid('ttlMs', 'a positive, finite number of milliseconds', ttlMs);
      }
      if (claims.has(key)) return false;
      claims.set(key, undefined);
      try {
        const runnerSession = session ?? (await client.sharedSession());
        runnerSession.throwIfLost();
        const { claim } = await claimer.claim({
          job: name,
          keys: jobKeys(prefix, name),
          fireMs,
          attempt: 'scheduled',
          overlap,
          retentionSeconds: Math.max(retention, Math.ceil(ttlMs / 1000)),
          session: runnerSession,
        });
        if (!claim) {
          // Claimed elsewhere, a run going on (overlap 'skip'), or too old to claim safely.
          claims.delete(key);
          return false;
        }
        claims.set(key, { claim, session: runnerSession, startedAt: performance.now() });
        return true;
      } catch (err) {
        claims.delete(key);
        // node-cron fails closed on a throw: the fire is skipped on this instance.
        report(name, fireMs, err as Error);
        throw err;
      }
    },

    async onComplete(key) {
      const held = claims.get(key);
      if (!held?.claim) return;
      claims.delete(key);
      const { name, fireMs } = parseCoordinatorKey(key);
      const lost = held.session?.signal.aborted === true;
      const ended = lost
        ? { outcome: 'lost' as const }
        : (held.ended ?? { outcome: 'completed' as const });
      runs({ job: name, outcome: ended.outcome });
      await claimer.finish(
        held.claim,
        { ...ended, durationMs: performance.now() - held.startedAt },
        (err) => report(name, fireMs, err),
      );
    },

    track(task) {
      if (
        typeof task !== 'object' ||
        task === null ||
        typeof task.on !== 'function' ||
        typeof task.off !== 'function'
      ) {
        throw invalid('task', "a node-cron ScheduledTask (cron.schedule()'s result)", task);
      }
      const name = task.name;
      encodeJob(name, 'task.name');
      const ended = (outcome: RunOutcome) => (context: TaskContext) => {
        const date = context?.date;
        if (!(date instanceof Date) || !Number.isFinite(date.getTime())) return;
        const held = claims.get(`${name}:${date.toISOString()}`);
        if (!held?.claim) return;
        const error = outcome === 'error' ? recordError(context.execution?.error) : undefined;
        held.ended = { outcome, ...(error === undefined ? {} : { error }) };
      };
      const onFinished = ended('ok');
      const onFailed = ended('error');
      task.on('execution:finished', onFinished);
      task.on('execution:failed', onFailed);
      return {
        [Symbol.dispose]() {
          task.off('execution:finished', onFinished);
          task.off('execution:failed', onFailed);
        },
      };
    },

    claimOf(name, fireTime) {
      encodeJob(name, 'name');
      if (!(fireTime instanceof Date) || !Number.isFinite(fireTime.getTime())) {
        throw invalid('fireTime', 'a valid Date (node-cron passes it as context.date)', fireTime);
      }
      const held = claims.get(`${name}:${fireTime.toISOString()}`);
      return held?.claim && held.session
        ? { token: held.claim.token, signal: held.session.signal }
        : undefined;
    },

    async history(name, historyOptions) {
      const keys = jobKeys(prefix, name);
      const { limit } = optionsObject(historyOptions, ['limit']);
      return claimer.history(
        name,
        keys,
        validateLimit(limit, defaults.historyLimit, limits.maxHistoryLimit),
      );
    },

    onError(listener) {
      return errors.add(listener);
    },
  };
}
