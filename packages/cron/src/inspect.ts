/**
 * What operators (and `leasehold inspect`) see of the jobs under a cron prefix, without a
 * scheduler: each job's schedule as its replicas announced it, its next fire, and its newest
 * records. Jobs are found by skipping from one job's keys to the next (one small read per job),
 * so a job with many retained records costs no more than one with few.
 */
import type { Leasehold } from '@leasehold/core';
import { kvCall } from '@leasehold/core/internal';
import { historyRequest, jobKeys, readHistory, type HistoryEntry } from './claims.js';
import { parseSchedule, type ScheduleSpec } from './fires.js';
import {
  defaults,
  invalid,
  limits,
  optionsObject,
  validateLimit,
  validatePrefix,
} from './options.js';

/** A job's schedule as a replica that runs it wrote it (on that replica's lease). */
export interface Announcement {
  schedule: ScheduleSpec;
  timeZone: string;
  runner: string;
}

/** One job as {@link inspectJobs} reports it. */
export interface JobReport {
  /** The job's name. */
  job: string;
  /** As announced by a live replica; absent when none runs it (or a node-cron coordinator does). */
  schedule?: ScheduleSpec;
  /** The time zone its cron expression is read in, as announced with `schedule`. */
  timeZone?: string;
  /** The next fire by this machine's clock, when the schedule is known. */
  next?: Date;
  /** Newest records first. */
  recent: HistoryEntry[];
}

/** Options of {@link inspectJobs}; every field is optional. */
export interface InspectJobsOptions {
  /** Default `/leasehold/cron/`, as the scheduler's. */
  prefix?: string;
  /** Records per job. Default 5. */
  limit?: number;
}

/** Where a job's schedule is announced: one key per runner lease, `[start, end)`. */
export const announcementRange = (prefix: string, job: string): [string, string] => {
  const base = jobKeys(prefix, job).running.slice(0, -'running'.length);
  return [`${base}schedule/`, `${base}schedule0`];
};

/** The key a replica on lease `leaseId` announces a job's schedule on. */
export const announcementKey = (prefix: string, job: string, leaseId: bigint): string =>
  `${announcementRange(prefix, job)[0]}${leaseId.toString(16)}`;

/**
 * Reads every job under the prefix: schedule, next fire and newest records.
 *
 * `limit` is the number of records per job (1 to 1000, default 5). Bad input throws
 * {@link InvalidArgumentError}.
 *
 * @example
 * ```ts
 * for (const { job, next, recent } of await inspectJobs(client)) {
 *   console.log(job, next?.toISOString(), recent[0]?.outcome);
 * }
 * ```
 */
export async function inspectJobs(
  client: Leasehold,
  options?: InspectJobsOptions,
): Promise<JobReport[]> {
  if (
    typeof client !== 'object' ||
    client === null ||
    typeof (client as Partial<Leasehold>).sharedSession !== 'function'
  ) {
    throw invalid('client', 'a Leasehold client from connect()', client);
  }
  const o = optionsObject(options, ['prefix', 'limit']) as InspectJobsOptions;
  const prefix = validatePrefix(o.prefix ?? defaults.prefix);
  const limit = validateLimit(o.limit, defaults.inspectLimit, limits.maxInspectLimit);
  const reports: JobReport[] = [];
  for (const job of await jobNames(client, prefix)) {
    const keys = jobKeys(prefix, job);
    const [history, announced] = await Promise.all([
      kvCall(
        client,
        `history of job ${JSON.stringify(job)}`,
        (kv, o) => kv.txn(historyRequest(keys, limit), o),
        {
          idempotent: true,
        },
      ),
      kvCall(
        client,
        `schedule of job ${JSON.stringify(job)}`,
        (kv, o) => {
          const [key, end] = announcementRange(prefix, job);
          return kv.range({ key: Buffer.from(key), range_end: Buffer.from(end), limit: 1 }, o);
        },
        {
          idempotent: true,
        },
      ),
    ]);
    const report: JobReport = { job, recent: readHistory(history, keys, job) };
    const announcement = parseAnnouncement(announced.kvs[0]?.value);
    if (announcement) {
      report.schedule = announcement.schedule;
      report.timeZone = announcement.timeZone;
      try {
        report.next = new Date(
          parseSchedule(announcement.schedule, announcement.timeZone, Date.now()).next(Date.now())!,
        );
      } catch {
        // A schedule that no longer fires: no next fire to report.
      }
    }
    reports.push(report);
  }
  return reports;
}

function parseAnnouncement(value: Buffer | undefined): Announcement | undefined {
  if (!value) return undefined;
  try {
    const parsed = JSON.parse(value.toString()) as Partial<Announcement>;
    const { schedule, timeZone, runner } = parsed;
    const ok =
      (typeof schedule === 'string' ||
        typeof (schedule as { everyMs?: unknown })?.everyMs === 'number') &&
      typeof timeZone === 'string' &&
      typeof runner === 'string';
    return ok ? { schedule: schedule!, timeZone: timeZone, runner: runner } : undefined;
  } catch {
    return undefined;
  }
}

/** Job names under `prefix`, in key order: one read of one key per job. */
async function jobNames(client: Leasehold, prefix: string): Promise<string[]> {
  const names: string[] = [];
  const end = Buffer.from(prefix);
  end[end.length - 1]! += 1; // prefixes never end in 0xff (validated strings of UTF-8)
  for (let from = Buffer.from(prefix); ;) {
    const res = await kvCall(
      client,
      'cron jobs',
      (kv, o) => kv.range({ key: from, range_end: end, keys_only: true, limit: 1 }, o),
      { idempotent: true },
    );
    const key = res.kvs[0]?.key.toString();
    if (key === undefined) return names;
    const slash = key.indexOf('/', prefix.length);
    if (slash < 0) {
      from = Buffer.concat([res.kvs[0]!.key, Buffer.from([0])]); // not a job's key: step over it
      continue;
    }
    const segment = key.slice(prefix.length, slash);
    names.push(decodeJob(segment));
    // '0' follows '/': `<prefix><segment>0` is the first key after this job's keys.
    from = Buffer.from(`${prefix}${segment}0`);
  }
}

/** The job name of a key segment (`%2F` and `%25` back to `/` and `%`). */
function decodeJob(segment: string): string {
  return segment.replace(/%2F/g, '/').replace(/%25/g, '%');
}
