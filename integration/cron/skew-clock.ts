/**
 * What the clock-skew tests of @leasehold/cron share: schedulers with a wrapped wall clock, a
 * cron expression for one instant, and a wait for an instant.
 */
import type { Scheduler } from '@leasehold/cron';
import type { inProcess } from './in-process.js';

/** A scheduler of `cron` whose wall clock runs `offsetMs` ahead of the machine's (behind if negative). */
export const skewedReplica = (
  cron: ReturnType<typeof inProcess>,
  prefix: string,
  runner: string,
  offsetMs: number,
  maxClockSkewMs?: number,
): Promise<Scheduler> =>
  cron.scheduler(runner, {
    prefix,
    now: () => new Date(Date.now() + offsetMs),
    ...(maxClockSkewMs === undefined ? {} : { maxClockSkewMs }),
  });

/** A 6-field cron expression (seconds first, UTC) that fires once a year, at `ms`. */
export const once = (ms: number) => {
  const d = new Date(ms);
  return `${d.getUTCSeconds()} ${d.getUTCMinutes()} ${d.getUTCHours()} ${d.getUTCDate()} ${d.getUTCMonth() + 1} *`;
};

/** Resolves at `ms` on the machine's clock (the wait is for that instant, not a guess). */
export const until = (ms: number) =>
  new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms - Date.now())));
