/**
 * Fire identity: which instants a schedule fires at, and what a replica does when it wakes.
 *
 * A fire is named by the instant the schedule computes, never by the time a replica happens to
 * reach it: replicas whose clocks disagree by seconds, or whose timers run late, still name the
 * same fire the same way, so one claim key per fire is enough to run it once.
 */
import { Cron } from 'croner';
import { InvalidArgumentError } from './errors.js';
import { describeValue as describe } from '@leasehold/core/internal';
import { invalid, limits, type MisfirePolicy } from './options.js';

/** When a job fires: a cron expression (read with croner), or every `everyMs` milliseconds. */
export type ScheduleSpec =
  | string
  | {
      /** Fire at every multiple of this many milliseconds since the Unix epoch. */
      everyMs: number;
    };

/** How a run came about: its fire was reached on time, or it is a missed fire caught up. */
export type Attempt = 'scheduled' | 'catch-up';

/** The fire instants of one schedule, in epoch milliseconds. */
export interface Fires {
  /** For messages: `cron "0 * * * *" in UTC`, `every 60000 ms`. */
  readonly description: string;
  /** The first fire strictly after `afterMs`, or `undefined` if the schedule never fires again. */
  next(afterMs: number): number | undefined;
  /** Up to `n` fires at or before `atMs`, latest first. */
  previous(atMs: number, n: number): number[];
}

/**
 * Parses a schedule. Cron expressions are croner's (5 fields, or 6 with seconds first, or 7
 * with years; nicknames such as `@hourly`), read in `timeZone`. `{ everyMs }` fires at every
 * multiple of `everyMs` since the Unix epoch, so every replica computes the same instants
 * whenever it started. `nowMs` is used to reject a schedule that never fires again.
 */
export function parseSchedule(spec: unknown, timeZone: string, nowMs: number): Fires {
  const fires = typeof spec === 'string' ? cronFires(spec, timeZone) : everyFires(spec);
  if (fires.next(nowMs) === undefined) {
    throw new InvalidArgumentError(
      `schedule ${fires.description} never fires after ${new Date(nowMs).toISOString()}; give one that fires in the future`,
    );
  }
  return fires;
}

function cronFires(pattern: string, timeZone: string): Fires {
  let cron: Cron;
  try {
    // paused and without a function: croner only computes, it starts no timer.
    cron = new Cron(pattern, { timezone: timeZone, paused: true });
  } catch (err) {
    throw new InvalidArgumentError(
      `schedule ${describe(pattern)} is not a valid cron expression (${(err as Error).message}); allowed: 5 fields "min hour day month weekday", 6 with seconds first, 7 with years, or @yearly/@monthly/@weekly/@daily/@hourly`,
      { cause: err },
    );
  }
  const description = `cron ${JSON.stringify(pattern)} in ${timeZone}`;
  return {
    description,
    next(afterMs) {
      return cron.nextRun(new Date(afterMs))?.getTime();
    },
    previous(atMs, n) {
      // croner counts a run earlier in the same second as its reference as previous; a reference
      // 1 ms after `atMs` includes a fire exactly at `atMs`. Filtered again to be sure.
      return cron
        .previousRuns(n + 1, new Date(atMs + 1))
        .map((d) => d.getTime())
        .filter((t) => t <= atMs)
        .slice(0, n);
    },
  };
}

function everyFires(spec: unknown): Fires {
  const everyMs = (spec as { everyMs?: unknown } | null)?.everyMs;
  if (
    typeof spec !== 'object' ||
    spec === null ||
    Object.keys(spec).length !== 1 ||
    !Number.isInteger(everyMs) ||
    (everyMs as number) < limits.minEveryMs ||
    (everyMs as number) > limits.maxTimerMs
  ) {
    throw invalid(
      'schedule',
      `a cron expression string, or { everyMs } with a whole number of milliseconds from ${limits.minEveryMs} to ${limits.maxTimerMs}`,
      typeof spec === 'object' && spec !== null && !Array.isArray(spec) ? everyMs : spec,
    );
  }
  const p = everyMs as number;
  return {
    description: `every ${p} ms`,
    next: (afterMs) => (Math.floor(afterMs / p) + 1) * p,
    previous(atMs, n) {
      const last = Math.floor(atMs / p) * p;
      return Array.from({ length: n }, (_, i) => last - i * p);
    },
  };
}

/** What a replica does at one wake-up of a job's timer. */
export interface WakePlan {
  /** The fires to claim now, oldest first. */
  claims: { fireMs: number; attempt: Attempt }[];
  /**
   * Fires since the last wake that this replica reached too late and will not claim, latest
   * first (at most `limits.maxMissedReported`). Empty at start-up: fires before a replica
   * started are not its misses.
   */
  missed: number[];
  /** The latest fire this wake dealt with; the next wake considers only later ones. */
  handledMs: number | undefined;
}

export interface WakeInput {
  nowMs: number;
  /** The latest fire handled before (exclusive), or `undefined` at start-up. */
  afterMs: number | undefined;
  lateToleranceMs: number;
  misfire: MisfirePolicy;
  catchUpWindowMs: number;
}

/**
 * Decides, from the time now (this replica's clock) and the last fire handled, which fires to
 * claim and which were missed:
 * - every fire since the last wake that is at most `lateToleranceMs` old is **on time**, also
 *   when a later fire has come meanwhile (a replica woken late by a pause or a loaded machine
 *   still claims each fire; if another replica ran it, the claim finds its record): each is
 *   claimed as `'scheduled'`, oldest first; at start-up, only the latest of them;
 * - if none is, with `misfire: 'run-once'` the latest is claimed as `'catch-up'` if it is at
 *   most `catchUpWindowMs` old (at start-up too: nobody may have run it while no replica was
 *   up; if one did, the claim finds its record and the fire does not run again);
 * - every other fire since the last wake is missed.
 * A clock that went back (now before the last fire handled) claims nothing: the same fire is
 * never claimed twice by one replica.
 */
export function planWake(fires: Fires, input: WakeInput): WakePlan {
  const { nowMs, afterMs, lateToleranceMs, misfire, catchUpWindowMs } = input;
  const lookbackMs = misfire === 'run-once' ? Math.max(catchUpWindowMs, lateToleranceMs) : 0;
  const floorMs = afterMs ?? nowMs - Math.max(lateToleranceMs, lookbackMs);
  const due = fires.previous(nowMs, limits.maxMissedReported + 1).filter((t) => t > floorMs);
  const latest = due[0];
  if (latest === undefined) return { claims: [], missed: [], handledMs: afterMs };
  // At start-up only the fire it is at is this replica's to claim, not every one it could reach.
  const inTime = due.filter((t) => nowMs - t <= lateToleranceMs);
  const onTime = (afterMs === undefined ? inTime.slice(0, 1) : inTime).reverse();
  const claims: WakePlan['claims'] = onTime.map((fireMs) => ({ fireMs, attempt: 'scheduled' }));
  if (claims.length === 0 && misfire === 'run-once' && nowMs - latest <= catchUpWindowMs) {
    claims.push({ fireMs: latest, attempt: 'catch-up' });
  }
  const claimed = new Set(claims.map((c) => c.fireMs));
  const missed = afterMs === undefined ? [] : due.filter((t) => !claimed.has(t));
  return { claims, missed: missed.slice(0, limits.maxMissedReported), handledMs: latest };
}

/** The epoch ms of a fire as its key segment and record field: ISO 8601 in UTC, sortable. */
export const fireId = (fireMs: number): string => new Date(fireMs).toISOString();
