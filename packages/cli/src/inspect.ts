/**
 * `leasehold inspect`: every lock (holder, value, token, lease TTL left, waiters in order) and
 * every election (leader, value, candidates in order) under the prefixes, as a table on a
 * terminal or as JSON.
 *
 * The report is built from sections. Locks and elections are the two there are; scheduled jobs
 * of @leasehold/cron (last fires, outcome, next fire) are meant to be a third: implement
 * {@link InspectSection} over cron's claim keys and add it to {@link SECTIONS}. The JSON report
 * then gains a property named after the section's `key`, and the table a block of its own;
 * nothing else here changes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Leasehold } from '@leasehold/core';
import { defaults as cronDefaults, inspectJobs, type JobReport } from '@leasehold/cron';
import { Etcd3, type IOptions } from 'etcd3';
import { connectOptions, connectWith, type ConnectionFlags } from './connection.js';
import { CliError, exitCodes } from './exit-codes.js';
import { formatDuration, printable, quotedValue, table, toJson } from './format.js';
import { decodeName, leaseHex, parseQueueKey } from './keys.js';
import { parseDurationMs } from './parse.js';
import { inQueueOrder, readPrefix, type Entry } from './read.js';
import { Signals } from './signals.js';

export interface InspectFlags extends ConnectionFlags {
  prefix?: string;
  cronPrefix?: string;
  watch?: boolean;
  json?: boolean;
  table?: boolean;
  interval?: string;
}

/** A key in a queue, with the time its lease has left. */
export interface Member {
  key: string;
  value: string;
  token: bigint;
  /** Lowercase hex, as in the key; `"0"` for a key without a lease. */
  leaseId: string;
  /** Seconds the lease has left as etcd says; -1 if it no longer exists; null without a lease. */
  ttlSeconds: number | null;
}

/** A lock or an election: who is first, and who waits behind, in order. */
export interface Queue {
  name: string;
  first: Member;
  behind: Member[];
}

/** What a section reads with. */
export interface InspectContext {
  client: Leasehold;
  /** Only names starting with this (`--prefix`). */
  namePrefix: string;
  /** Where `@leasehold/cron` keeps its claims and records (`--cron-prefix`). */
  cronPrefix: string;
  /** Seconds left of each lease (decimal id → TTL), read once per report. */
  ttlOf(leaseIds: readonly bigint[]): Promise<Map<bigint, number>>;
}

export interface InspectSection<T = unknown> {
  /** The property of the JSON report. */
  key: string;
  read(context: InspectContext): Promise<T>;
  /** JSON-ready form (bigints become decimal strings on their own). */
  json(data: T): unknown;
  /** Lines of the table. */
  render(data: T): string[];
}

/**
 * The raw segment of a key under `prefix` (`<segment>/<rest>`), for a key one level deep. A `%`
 * that is not `%25` or `%2F` never appears in an encoded name: `<name>%sem`, `<name>%rw` and
 * `<name>%slot` are a semaphore's queue, a read/write lock's queue and a semaphore's slots.
 */
function segmentOf(prefix: string, key: string): string | undefined {
  const rest = key.slice(prefix.length);
  const slash = rest.indexOf('/');
  return slash > 0 && slash === rest.lastIndexOf('/') ? rest.slice(0, slash) : undefined;
}
const isOwnNamespace = (segment: string) => /%(?!25|2F)/i.test(segment);

/** Groups the keys under `prefix` into queues, in name order, each in create-revision order. */
export function queues(prefix: string, entries: Entry[], namePrefix = ''): Map<string, Entry[]> {
  const byName = new Map<string, Entry[]>();
  for (const entry of entries) {
    const segment = segmentOf(prefix, entry.key);
    if (segment !== undefined && isOwnNamespace(segment)) continue; // not a lock
    const parsed = parseQueueKey(prefix, entry.key);
    if (parsed === undefined || !parsed.name.startsWith(namePrefix)) continue;
    const list = byName.get(parsed.name) ?? [];
    list.push(entry);
    byName.set(parsed.name, list);
  }
  const sorted = [...byName.keys()].sort();
  const ordered = sorted.map((name) => [name, inQueueOrder(byName.get(name)!)] as const);
  return new Map(ordered.filter(([, list]) => list.length > 0)); // keys without a lease only
}

/** The keys under the lock prefix in the queues `<name><suffix>/`, by name, oldest first. */
async function sharedQueues(context: InspectContext, suffix: '%sem' | '%rw') {
  const prefix = context.client.lockPrefix;
  const { entries } = await readPrefix(context.client, prefix);
  const byName = new Map<string, Entry[]>();
  for (const entry of entries) {
    const segment = segmentOf(prefix, entry.key);
    if (!segment?.endsWith(suffix) || entry.leaseId === 0n) continue;
    const name = decodeName(segment.slice(0, -suffix.length));
    if (name.startsWith(context.namePrefix)) byName.set(name, [...(byName.get(name) ?? []), entry]);
  }
  const ttls = await context.ttlOf([...new Set([...byName.values()].flat().map((e) => e.leaseId))]);
  const member = (e: { key: string; value: string; token: bigint; leaseId: bigint }): Member => ({
    key: e.key,
    value: e.value,
    token: e.token,
    leaseId: leaseHex(e.leaseId),
    ttlSeconds: ttls.get(e.leaseId) ?? -1,
  });
  const names = [...byName.keys()].sort();
  return { prefix, names, member, queue: (name: string) => inQueueOrder(byName.get(name)!) };
}

/** A semaphore or read/write lock: its holders and waiters, each with a tag (slot or mode). */
interface Shared {
  name: string;
  permits?: number | undefined;
  holders: (Member & { tag: string })[];
  waiters: (Member & { tag: string })[];
}

/**
 * The line for an empty section. With `--prefix` it says that filter: there may be others under
 * the key prefix, just none whose name starts with it.
 */
export function noneLine(title: string, prefix: string, namePrefix = ''): string {
  const named = namePrefix === '' ? '' : ` whose name starts with ${quotedValue(namePrefix)}`;
  return `${title}: none${named} under ${prefix}`;
}

function renderShared(
  title: string,
  prefix: string,
  tag: string,
  list: readonly Shared[],
  namePrefix = '',
) {
  if (list.length === 0) return [noneLine(title, prefix, namePrefix)];
  const rows: string[][] = [['NAME', tag, 'HOLDER', 'TOKEN', 'LEASE', 'TTL']];
  for (const q of list) {
    const name = printable(q.name) + (q.permits === undefined ? '' : ` (${q.permits} permits)`);
    const line = (first: string, m: Member & { tag: string }) => [
      first,
      m.tag,
      quotedValue(m.value),
      m.token.toString(),
      m.leaseId,
      ttlText(m.ttlSeconds),
    ];
    q.holders.forEach((m, i) => rows.push(line(i === 0 ? name : '', m)));
    q.waiters.forEach((m, i) => rows.push(line(`  #${i + 1}`, m)));
  }
  return [`${title} under ${prefix}`, ...table(rows)];
}

/** A holder or waiter in JSON, its tag (slot or mode) under `tag`. */
const taggedJson =
  (tag: string, value: (t: string) => unknown) => (m: Member & { tag: string }) => {
    const { tag: t, ...member } = m;
    return { ...(t === '' ? {} : { [tag]: value(t) }), ...member };
  };

/** Semaphores: the limit, each holder with its slot, the waiters in the order they get in. */
export const semaphoresSection: InspectSection<{
  prefix: string;
  namePrefix: string;
  list: Shared[];
}> = {
  key: 'semaphores',
  async read(context) {
    const { prefix, names, member } = await sharedQueues(context, '%sem');
    const list = await Promise.all(
      names.map(async (name): Promise<Shared> => {
        const state = await context.client.semaphore(name);
        return {
          name,
          permits: state.permits,
          holders: state.holders.map((h) => ({ ...member(h), tag: String(h.slot ?? '-') })),
          waiters: state.waiting.map((w) => ({ ...member(w), tag: '-' })),
        };
      }),
    );
    return {
      prefix,
      namePrefix: context.namePrefix,
      list: list.filter((q) => q.holders.length + q.waiters.length > 0),
    };
  },
  json: ({ list }) =>
    list.map((q) => ({
      name: q.name,
      permits: q.permits ?? null,
      holders: q.holders.map(taggedJson('slot', (t) => (t === '-' ? null : Number(t)))),
      waiters: q.waiters.map(({ tag: _tag, ...w }) => w),
    })),
  render: ({ prefix, namePrefix, list }) =>
    renderShared('SEMAPHORES', prefix, 'SLOT', list, namePrefix),
};

/** Read/write locks: who holds (readers, or one writer) and who waits, with their modes. */
export const rwLocksSection: InspectSection<{
  prefix: string;
  namePrefix: string;
  list: Shared[];
}> = {
  key: 'rwLocks',
  async read(context) {
    const { prefix, names, member, queue } = await sharedQueues(context, '%rw');
    const list = names.map((name): Shared => {
      const q: Shared = { name, holders: [], waiters: [] };
      let blocked = false;
      for (const e of queue(name)) {
        const mode = /\/r\.[0-9a-f]+\.\d+$/.test(e.key) ? 'read' : 'write';
        // A reader holds while no writer is ahead; a writer only when first.
        const holds = !blocked && (mode === 'read' || q.holders.length === 0);
        (holds ? q.holders : q.waiters).push({ ...member(e), tag: mode });
        if (!holds || mode === 'write') blocked = true;
      }
      return q;
    });
    return { prefix, namePrefix: context.namePrefix, list };
  },
  json: ({ list }) =>
    list.map((q) => ({
      name: q.name,
      holders: q.holders.map(taggedJson('mode', (t) => t)),
      waiters: q.waiters.map(taggedJson('mode', (t) => t)),
    })),
  render: ({ prefix, namePrefix, list }) =>
    renderShared('READ/WRITE LOCKS', prefix, 'MODE', list, namePrefix),
};

async function readQueues(context: InspectContext, prefix: string): Promise<Queue[]> {
  const { entries } = await readPrefix(context.client, prefix);
  const grouped = queues(prefix, entries, context.namePrefix);
  const ttls = await context.ttlOf([...new Set(entries.map((e) => e.leaseId))]);
  const member = (e: Entry): Member => ({
    key: e.key,
    value: e.value,
    token: e.token,
    leaseId: leaseHex(e.leaseId),
    ttlSeconds: e.leaseId === 0n ? null : (ttls.get(e.leaseId) ?? -1),
  });
  return [...grouped].map(([name, list]) => ({
    name,
    first: member(list[0]!),
    behind: list.slice(1).map(member),
  }));
}

const ttlText = (ttl: number | null) =>
  ttl === null ? 'none' : ttl < 0 ? 'expired' : formatDuration(ttl * 1000);

/** Table lines for a list of queues. */
export function renderQueues(
  title: string,
  prefix: string,
  firstHeading: string,
  list: readonly Queue[],
  namePrefix = '',
): string[] {
  if (list.length === 0) return [noneLine(title, prefix, namePrefix)];
  const rows: string[][] = [['NAME', firstHeading, 'TOKEN', 'LEASE', 'TTL', 'WAITING']];
  for (const q of list) {
    const m = q.first;
    rows.push([
      printable(q.name),
      quotedValue(m.value),
      m.token.toString(),
      m.leaseId,
      ttlText(m.ttlSeconds),
      String(q.behind.length),
    ]);
    q.behind.forEach((w, i) => {
      rows.push([
        `  #${i + 1}`,
        quotedValue(w.value),
        w.token.toString(),
        w.leaseId,
        ttlText(w.ttlSeconds),
        '',
      ]);
    });
  }
  return [`${title} under ${prefix}`, ...table(rows)];
}

const memberJson = (m: Member) => ({ ...m });

export const locksSection: InspectSection<{ prefix: string; namePrefix: string; list: Queue[] }> = {
  key: 'locks',
  async read(context) {
    const prefix = context.client.lockPrefix;
    return { prefix, namePrefix: context.namePrefix, list: await readQueues(context, prefix) };
  },
  json: ({ list }) =>
    list.map((q) => ({
      name: q.name,
      holder: memberJson(q.first),
      waiters: q.behind.map(memberJson),
    })),
  render: ({ prefix, namePrefix, list }) =>
    renderQueues('LOCKS', prefix, 'HOLDER', list, namePrefix),
};

export const electionsSection: InspectSection<{
  prefix: string;
  namePrefix: string;
  list: Queue[];
}> = {
  key: 'elections',
  async read(context) {
    const prefix = context.client.electionPrefix;
    return { prefix, namePrefix: context.namePrefix, list: await readQueues(context, prefix) };
  },
  json: ({ list }) =>
    list.map((q) => ({
      name: q.name,
      leader: memberJson(q.first),
      candidates: q.behind.map(memberJson),
    })),
  render: ({ prefix, namePrefix, list }) =>
    renderQueues('ELECTIONS', prefix, 'LEADER', list, namePrefix),
};

/** The report's sections, in order. @leasehold/cron's section goes here when it lands. */
const RECENT_FIRES = 3;

/** `@leasehold/cron` jobs: schedule, next fire, and the newest fires with runner and outcome. */
export const jobsSection: InspectSection<{
  prefix: string;
  namePrefix: string;
  list: JobReport[];
}> = {
  key: 'jobs',
  async read(context) {
    const prefix = context.cronPrefix;
    const all = await inspectJobs(context.client, { prefix, limit: RECENT_FIRES });
    return {
      prefix,
      namePrefix: context.namePrefix,
      list: all.filter((j) => j.job.startsWith(context.namePrefix)),
    };
  },
  json: ({ list }) =>
    list.map((j) => ({
      name: j.job,
      schedule: j.schedule ?? null,
      timeZone: j.timeZone ?? null,
      next: j.next?.toISOString() ?? null,
      recent: j.recent.map((r) => ({
        fireTime: r.fireTime.toISOString(),
        token: r.token,
        runner: r.runner,
        attempt: r.attempt,
        outcome: r.outcome,
        durationMs: r.durationMs ?? null,
      })),
    })),
  render: ({ prefix, namePrefix, list }) => {
    if (list.length === 0) return [noneLine('CRON JOBS', prefix, namePrefix)];
    const rows: string[][] = [
      ['JOB', 'SCHEDULE', 'NEXT FIRE', 'FIRE', 'OUTCOME', 'TOKEN', 'RUNNER'],
    ];
    for (const j of list) {
      const schedule =
        j.schedule === undefined
          ? '(no replica)'
          : typeof j.schedule === 'string'
            ? `${j.schedule} ${j.timeZone ?? ''}`.trim()
            : `every ${formatDuration(j.schedule.everyMs)}`;
      const next = j.next?.toISOString() ?? '-';
      if (j.recent.length === 0) rows.push([printable(j.job), schedule, next, '-', '-', '-', '-']);
      j.recent.forEach((r, i) => {
        rows.push([
          i === 0 ? printable(j.job) : '',
          i === 0 ? printable(schedule) : '',
          i === 0 ? next : '',
          r.fireTime.toISOString(),
          r.outcome,
          r.token.toString(),
          quotedValue(r.runner),
        ]);
      });
    }
    return [`CRON JOBS under ${prefix}`, ...table(rows)];
  },
};

export const SECTIONS: InspectSection<never>[] = [
  locksSection as InspectSection<never>,
  semaphoresSection as InspectSection<never>,
  rwLocksSection as InspectSection<never>,
  electionsSection as InspectSection<never>,
  jobsSection as InspectSection<never>,
];

/** One report: each section's data, by key. */
export async function report(
  context: InspectContext,
  sections: readonly InspectSection<never>[] = SECTIONS,
): Promise<{ at: Date; data: Map<InspectSection<never>, unknown> }> {
  const data = new Map<InspectSection<never>, unknown>();
  const read = await Promise.all(sections.map((s) => s.read(context)));
  sections.forEach((s, i) => data.set(s, read[i]));
  return { at: new Date(), data };
}

/** The JSON document of a report. */
export function reportJson(
  client: Pick<Leasehold, 'lockPrefix' | 'electionPrefix'>,
  at: Date,
  data: Map<InspectSection<never>, unknown>,
  cronPrefix: string = cronDefaults.prefix,
): string {
  const doc: Record<string, unknown> = {
    time: at.toISOString(),
    lockPrefix: client.lockPrefix,
    electionPrefix: client.electionPrefix,
    cronPrefix,
  };
  for (const [section, value] of data) doc[section.key] = section.json(value as never);
  return toJson(doc);
}

export function reportTable(at: Date, data: Map<InspectSection<never>, unknown>): string {
  const blocks = [...data].map(([section, value]) => section.render(value as never).join('\n'));
  return `${blocks.join('\n\n')}\n`;
}

/**
 * Lease TTLs through an etcd3 client of the CLI's own: the SDK reads keys for us (`kvCall`) but
 * exposes no lease calls. Same endpoints, TLS and credentials as the SDK's connection.
 */
function leaseReader(flags: ConnectionFlags, callTimeoutMs: number) {
  let etcd: Etcd3 | undefined;
  const open = () => {
    const options = connectOptions(flags);
    const hosts = (
      typeof options.endpoints === 'string' ? options.endpoints.split(',') : [...options.endpoints]
    ).map((h) => (h.includes('://') ? h.trim() : `http://${h.trim()}`));
    const etcdOptions: IOptions = { hosts };
    if (options.tls) {
      etcdOptions.credentials = {
        rootCertificate: Buffer.from(options.tls.caCert),
        ...(options.tls.clientKey ? { privateKey: Buffer.from(options.tls.clientKey) } : {}),
        ...(options.tls.clientCert ? { certChain: Buffer.from(options.tls.clientCert) } : {}),
      };
    }
    if (options.auth) etcdOptions.auth = { ...options.auth };
    return new Etcd3(etcdOptions);
  };
  return {
    async ttlOf(ids: readonly bigint[]): Promise<Map<bigint, number>> {
      const out = new Map<bigint, number>();
      const live = ids.filter((id) => id !== 0n);
      if (live.length === 0) return out;
      etcd ??= open();
      const client = etcd;
      // A few at a time: a large keyspace must not open thousands of calls at once.
      for (let i = 0; i < live.length; i += 16) {
        await Promise.all(
          live.slice(i, i + 16).map(async (id) => {
            try {
              const res = await client.leaseClient.leaseTimeToLive(
                { ID: id.toString() },
                { deadline: Date.now() + callTimeoutMs },
              );
              out.set(id, Number(res.TTL));
            } catch (err) {
              throw new CliError(
                `etcd lease time-to-live of ${leaseHex(id)} failed: ${(err as Error).message}`,
                exitCodes.unavailable,
                { cause: err },
              );
            }
          }),
        );
      }
      return out;
    },
    close: () => etcd?.close(),
  };
}

export async function inspect(
  flags: InspectFlags,
  out: NodeJS.WriteStream,
  write: (text: string) => Promise<void>,
): Promise<number> {
  const intervalMs =
    flags.interval === undefined ? 1_000 : parseDurationMs('--interval', flags.interval);
  if (flags.interval !== undefined && flags.watch !== true) {
    throw new CliError(
      `--interval ${flags.interval} sets how often --watch refreshes: add --watch, or leave --interval out`,
      exitCodes.usage,
    );
  }
  const asTable = flags.table === true || (flags.json !== true && out.isTTY === true);
  if (flags.table && flags.json) {
    throw new CliError('--json and --table exclude each other: choose one', exitCodes.usage);
  }
  using signals = new Signals({ ignoreStop: false, quietStop: true });
  const client = await connectWith(flags, { signal: signals.interrupted });
  const leases = leaseReader(flags, connectOptions(flags).callTimeoutMs ?? 5_000);
  const context: InspectContext = {
    client,
    namePrefix: flags.prefix ?? '',
    cronPrefix: flags.cronPrefix ?? cronDefaults.prefix,
    ttlOf: (ids) => leases.ttlOf(ids),
  };
  try {
    for (;;) {
      const { at, data } = await report(context);
      if (!asTable) await write(`${reportJson(client, at, data, context.cronPrefix)}\n`);
      else if (flags.watch && out.isTTY) {
        // Home, clear, then the report: redrawn in place.
        await write(
          `\x1b[H\x1b[2J${at.toISOString()}  (every ${formatDuration(intervalMs)}; Ctrl-C to stop)\n\n${reportTable(at, data)}`,
        );
      } else
        await write(
          `${flags.watch ? `${at.toISOString()}\n` : ''}${reportTable(at, data)}${flags.watch ? '\n' : ''}`,
        );
      if (!flags.watch) return exitCodes.ok;
      await sleep(intervalMs, undefined, { signal: signals.interrupted }).catch(() => {});
      signals.interrupted.throwIfAborted();
    }
  } finally {
    leases.close();
    await client.close();
  }
}
