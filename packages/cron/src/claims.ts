/**
 * The key layout and the transactions of a claim. Pure: requests are built and answers read
 * here, and sent elsewhere.
 *
 * For a job `j` under `prefix` (the job name escaped so `jobs` and `jobs/a` never share a range),
 * and a fire at instant `F` (ISO 8601, UTC, so keys sort by fire time):
 *
 * - `<prefix>j/fire/F`, the **record**: on a retention lease of its own, so it stays after the
 *   run (and after its runner is gone) for the job's `retentionSeconds`. It says who claimed the
 *   fire and, once known, the outcome. Any replica that reaches `F` later finds it and does not
 *   run the fire again.
 * - `<prefix>j/claim/F`, the **claim**: on the runner's lease. It exists while the runner is
 *   alive and running `F`; a record that says "running" without its claim means the runner died.
 * - `<prefix>j/running`, the **running marker** (with `overlap: 'skip'` and `'replace'`): on
 *   the runner's lease, while a fire of `j` runs anywhere. Its mod revision is the token of the
 *   run it belongs to (`'replace'` overwrites it; `'skip'` only creates it).
 *
 * The claim is ONE transaction: if the record does not exist (and, for `overlap: 'skip'`, the
 * marker does not either), create the record, the claim and the marker. All three then have the
 * transaction's revision as create revision: the run's fencing token, larger than any token
 * issued before in the cluster.
 */
import type { kvCall } from '@leasehold/core/internal';
import type { Attempt } from './fires.js';
import { fireId } from './fires.js';
import { encodeJob, limits, type OverlapPolicy } from './options.js';

type Kv = Parameters<Parameters<typeof kvCall>[2]>[0];
export type TxnRequest = Parameters<Kv['txn']>[0];
export type TxnResponse = Awaited<ReturnType<Kv['txn']>>;
export type RangeRequest = Parameters<Kv['range']>[0];
export type RangeResponse = Awaited<ReturnType<Kv['range']>>;
type KeyValue = RangeResponse['kvs'][number];

/**
 * How a run ended. `'replaced'`: a later fire took over under `overlap: 'replace'`.
 * `'completed'` is node-cron's when the coordinator was not told how the task ended.
 */
export type RunOutcome =
  'ok' | 'error' | 'timed-out' | 'lost' | 'stopped' | 'replaced' | 'completed';

/** A fire's record as stored (JSON). Tokens are not stored: they are create revisions. */
export interface FireRecord {
  v: 1;
  job: string;
  fireTime: string;
  /** Who claimed it: the scheduler's `runner` (default `hostname:pid`). */
  runner: string;
  /** The claiming scheduler instance (random): tells its own claim from another's on a retry. */
  instance: string;
  attempt: Attempt;
  /** Wall-clock time of the claim, by the claimer's clock. */
  claimedAt: string;
  state: 'running' | 'finished';
  outcome?: RunOutcome;
  durationMs?: number;
  error?: string;
}

/** Where one job's keys live. */
export interface JobKeys {
  record(fireMs: number): string;
  claim(fireMs: number): string;
  readonly running: string;
  /** `[start, end)` of the job's records. */
  readonly records: readonly [string, string];
  /** `[start, end)` of the job's claims. */
  readonly claims: readonly [string, string];
}

export function jobKeys(prefix: string, job: string): JobKeys {
  const base = `${prefix}${encodeJob(job)}/`;
  // '0' follows '/' in byte order: `<base>fire0` ends the range of `<base>fire/...`.
  return {
    record: (fireMs) => `${base}fire/${fireId(fireMs)}`,
    claim: (fireMs) => `${base}claim/${fireId(fireMs)}`,
    running: `${base}running`,
    records: [`${base}fire/`, `${base}fire0`],
    claims: [`${base}claim/`, `${base}claim0`],
  };
}

const b = (s: string) => Buffer.from(s);
const absent = (key: string) =>
  ({ key: b(key), target: 'Create', result: 'Equal', create_revision: '0' }) as const;
const createdAt = (key: string, revision: bigint) =>
  ({
    key: b(key),
    target: 'Create',
    result: 'Equal',
    create_revision: revision.toString(),
  }) as const;
const modifiedAt = (key: string, revision: bigint) =>
  ({
    key: b(key),
    target: 'Mod',
    result: 'Equal',
    mod_revision: revision.toString(),
  }) as const;

export function encodeRecord(record: FireRecord): Buffer {
  return b(JSON.stringify(record));
}

/** A record's value, or `undefined` if it is not one of ours (written by something else). */
export function decodeRecord(value: Buffer | undefined): FireRecord | undefined {
  if (!value) return undefined;
  try {
    const parsed = JSON.parse(value.toString()) as Partial<FireRecord>;
    if (parsed?.v === 1 && typeof parsed.runner === 'string' && typeof parsed.state === 'string') {
      return parsed as FireRecord;
    }
  } catch {
    // not JSON: someone else's key
  }
  return undefined;
}

/** An error message as kept in a record: short enough for a key that travels on every read. */
export function recordError(error: unknown): string | undefined {
  if (error === undefined) return undefined;
  let text: string;
  if (error instanceof Error) text = `${error.name}: ${error.message}`;
  else if (typeof error === 'string') text = error;
  else {
    try {
      text = JSON.stringify(error) ?? typeof error;
    } catch {
      text = typeof error;
    }
  }
  return text.length > limits.maxErrorChars ? `${text.slice(0, limits.maxErrorChars)}…` : text;
}

export interface ClaimInput {
  keys: JobKeys;
  fireMs: number;
  overlap: OverlapPolicy;
  /** The runner's lease: claim and marker live and die with it. */
  runnerLease: bigint;
  /** The retention lease the record goes on. */
  retentionLease: string;
  /** The record to create, `state: 'running'`. */
  record: FireRecord;
}

/**
 * The claim transaction. Safe to send again after an unknown outcome: if the first one landed,
 * the second finds the record with this scheduler's `instance` and adopts it (see
 * {@link readClaim}), as a mutex acquire adopts its own key.
 *
 * With `overlap: 'skip'`, a fire that finds the running marker (and no record) is skipped by
 * this replica only, and nothing is written: a replica whose clock runs ahead reaches a fire
 * while the run of an earlier fire is still going (on time, on another replica), and must not
 * make every replica skip it. A replica that reaches the fire once no run is going claims it.
 *
 * With `overlap: 'replace'`, the marker is written if it is absent or names an earlier fire: the
 * run it named sees its mod revision change and learns it was replaced. A marker of a later fire
 * (claimed by a replica whose clock runs ahead, or that woke with both due and claimed only the
 * later) is left alone, and the fire is skipped like one that finds a run going under `'skip'`:
 * an earlier fire never replaces a later one.
 */
export function claimRequest(input: ClaimInput): TxnRequest {
  const { keys, fireMs, overlap, runnerLease, retentionLease, record } = input;
  const recordKey = keys.record(fireMs);
  const lease = runnerLease.toString();
  const writes: NonNullable<TxnRequest['success']> = [
    { request_put: { key: b(recordKey), value: encodeRecord(record), lease: retentionLease } },
    { request_put: { key: b(keys.claim(fireMs)), value: b(record.runner), lease } },
  ];
  if (overlap === 'allow') {
    return {
      compare: [absent(recordKey)],
      success: writes,
      failure: [{ request_range: { key: b(recordKey) } }],
    };
  }
  const marker: Marker = {
    fireTime: record.fireTime,
    runner: record.runner,
    instance: record.instance,
  };
  writes.push({ request_put: { key: b(keys.running), value: b(JSON.stringify(marker)), lease } });
  const failure: NonNullable<TxnRequest['success']> = [
    { request_range: { key: b(recordKey) } },
    { request_range: { key: b(keys.running) } },
  ];
  if (overlap === 'replace') {
    // The marker is replaced only if it names an earlier fire. Its value starts with the fire
    // time (fixed-width ISO 8601), so bytes compare as times do; etcd has no "or", hence the
    // nested transaction for "marker absent or earlier".
    const earlier = b(`{"fireTime":${JSON.stringify(record.fireTime)}`);
    failure.push({
      request_txn: {
        compare: [
          absent(recordKey),
          { key: b(keys.running), target: 'Value', result: 'Less', value: earlier },
        ],
        success: writes,
        failure: [],
      },
    });
  }
  return { compare: [absent(recordKey), absent(keys.running)], success: writes, failure };
}

/** The running marker's value: whose run of which fire it is. */
export interface Marker {
  fireTime: string;
  runner: string;
  /** The claiming scheduler instance (absent in markers of older versions). */
  instance?: string;
}

/** The running marker as read: its value, and the token of the run it names. */
export function readMarker(
  kv: KeyValue | undefined,
): (Partial<Marker> & { token: bigint }) | undefined {
  if (!kv) return undefined;
  let parsed: Partial<Marker> | undefined;
  try {
    parsed = JSON.parse(kv.value.toString()) as Partial<Marker>;
  } catch {
    parsed = undefined;
  }
  const field = (name: keyof Marker) =>
    typeof parsed?.[name] === 'string' ? { [name]: parsed[name] } : {};
  return {
    ...field('fireTime'),
    ...field('runner'),
    ...field('instance'),
    // `'replace'` overwrites the marker, which keeps its create revision: the mod revision is
    // the token of the claim that wrote it last (for `'skip'` the two are equal).
    token: BigInt(kv.mod_revision),
  };
}

/** The replacing run as a running marker names it (`{}` when the marker is gone). */
export function replacerOf(marker: ReturnType<typeof readMarker>): {
  fireTime?: string;
  runner?: string;
  token?: bigint;
} {
  return {
    ...(marker?.fireTime === undefined ? {} : { fireTime: marker.fireTime }),
    ...(marker?.runner === undefined ? {} : { runner: marker.runner }),
    ...(marker === undefined ? {} : { token: marker.token }),
  };
}

/** Who holds a fire (or the running marker) when a claim did not get it. */
export interface Holder {
  /** The runner (replica) that holds it; `undefined` if its record names none. */
  runner: string | undefined;
  /** The create revision of the record (or marker): the holder's token. */
  token: bigint | undefined;
  /** The fire it holds, as an ISO 8601 string; `undefined` if unknown. */
  fireTime: string | undefined;
}

export type ClaimResult =
  /**
   * `marker`: on an adopted claim (`overlap` `'skip'` or `'replace'`), the running marker as the
   * retry found it; under `'replace'` a later claim may have rewritten it since the first landed.
   */
  | {
      kind: 'claimed';
      token: bigint;
      adopted: boolean;
      marker?: ReturnType<typeof readMarker>;
    }
  | { kind: 'claimed-elsewhere'; holder: Holder }
  /** `instance`: the scheduler instance whose run the marker names, if it says. */
  | { kind: 'overlap'; holder: Holder; instance?: string };

function holderOf(kv: KeyValue | undefined): Holder {
  let parsed: { runner?: unknown; fireTime?: unknown } | undefined;
  try {
    parsed = kv ? (JSON.parse(kv.value.toString()) as typeof parsed) : undefined;
  } catch {
    parsed = undefined;
  }
  return {
    runner: typeof parsed?.runner === 'string' ? parsed.runner : undefined,
    token: kv ? BigInt(kv.create_revision) : undefined,
    fireTime: typeof parsed?.fireTime === 'string' ? parsed.fireTime : undefined,
  };
}

/** Reads the answer to {@link claimRequest}. `instance` is this scheduler's own. */
export function readClaim(res: TxnResponse, instance: string): ClaimResult {
  // Under 'replace', the nested transaction replaced the marker of an earlier fire's run.
  if (res.succeeded || res.responses[2]?.response_txn?.succeeded) {
    return { kind: 'claimed', token: BigInt(res.header.revision), adopted: false };
  }
  const kv = res.responses[0]?.response_range.kvs[0];
  if (!kv) {
    // No record, so the running marker made the claim fail: a run of the job is going.
    const marker = readMarker(res.responses[1]?.response_range.kvs[0]);
    return {
      kind: 'overlap',
      holder: { runner: marker?.runner, token: marker?.token, fireTime: marker?.fireTime },
      ...(marker?.instance === undefined ? {} : { instance: marker.instance }),
    };
  }
  const record = decodeRecord(kv.value);
  if (record?.instance === instance && record.state === 'running') {
    // An earlier attempt of this same claim landed (its answer was lost): it is ours.
    const marker = readMarker(res.responses[1]?.response_range.kvs[0]);
    return {
      kind: 'claimed',
      token: BigInt(kv.create_revision),
      adopted: true,
      ...(marker === undefined ? {} : { marker }),
    };
  }
  return { kind: 'claimed-elsewhere', holder: holderOf(kv) };
}

export interface FinishInput {
  keys: JobKeys;
  fireMs: number;
  token: bigint;
  overlap: OverlapPolicy;
  record: FireRecord;
}

/**
 * Records how a run ended and ends its claim, in one transaction guarded by the record's create
 * revision (the token), so it never touches a later record of the same key. The record keeps its
 * retention lease (`ignore_lease`); the claim is deleted, and the running marker only if it is
 * still this run's (its mod revision is the token: a replacing claim rewrote it otherwise).
 * Idempotent: safe to send again.
 */
export function finishRequest(input: FinishInput): TxnRequest {
  const { keys, fireMs, token, overlap, record } = input;
  const success: NonNullable<TxnRequest['success']> = [
    {
      request_put: {
        key: b(keys.record(fireMs)),
        value: encodeRecord(record),
        ignore_lease: true,
      },
    },
    { request_delete_range: { key: b(keys.claim(fireMs)) } },
  ];
  if (overlap !== 'allow') {
    success.push({
      request_txn: {
        compare: [modifiedAt(keys.running, token)],
        success: [{ request_delete_range: { key: b(keys.running) } }],
        failure: [],
      },
    });
  }
  return { compare: [createdAt(keys.record(fireMs), token)], success, failure: [] };
}

/** One fire as `history()` reports it. */
export interface HistoryEntry {
  /** The job. */
  job: string;
  /** The fire's instant, as the schedule computes it. */
  fireTime: Date;
  /** The claim's token (the record's create revision). */
  token: bigint;
  /** The runner (replica) that claimed the fire: its `runner` option, `hostname:pid` by default. */
  runner: string;
  /** Whether the fire was run on time or caught up. */
  attempt: Attempt;
  /** When the runner claimed the fire, by its clock. */
  claimedAt: Date;
  /**
   * `'running'` while its runner is alive and running it; a run's outcome once it ended;
   * `'lost'` also when its runner died without recording one.
   */
  outcome: RunOutcome | 'running';
  /** How long the run took, in ms, once it ended. */
  durationMs?: number;
  /** What the run threw (`name: message`, shortened), when its outcome is `'error'`. */
  error?: string;
}

/** A read of the running marker: is the run of `token` still the job's? */
export function markerRequest(keys: JobKeys): RangeRequest {
  return { key: b(keys.running) };
}

/** A read of a job's newest records and of its live claims, at one revision. */
export function historyRequest(keys: JobKeys, limit: number): TxnRequest {
  return {
    compare: [],
    success: [
      {
        request_range: {
          key: b(keys.records[0]),
          range_end: b(keys.records[1]),
          sort_order: 'Descend',
          sort_target: 'Key',
          limit,
        },
      },
      { request_range: { key: b(keys.claims[0]), range_end: b(keys.claims[1]), keys_only: true } },
    ],
    failure: [],
  };
}

export function readHistory(res: TxnResponse, keys: JobKeys, job: string): HistoryEntry[] {
  const records = res.responses[0]?.response_range.kvs ?? [];
  const live = new Set((res.responses[1]?.response_range.kvs ?? []).map((kv) => kv.key.toString()));
  const entries: HistoryEntry[] = [];
  for (const kv of records) {
    const record = decodeRecord(kv.value);
    if (!record) continue;
    const fireTime = new Date(record.fireTime);
    let outcome: HistoryEntry['outcome'];
    if (record.state === 'finished') outcome = record.outcome ?? 'completed';
    else outcome = live.has(keys.claim(fireTime.getTime())) ? 'running' : 'lost';
    entries.push({
      job,
      fireTime,
      token: BigInt(kv.create_revision),
      runner: record.runner,
      attempt: record.attempt,
      claimedAt: new Date(record.claimedAt),
      outcome,
      ...(record.durationMs === undefined ? {} : { durationMs: record.durationMs }),
      ...(record.error === undefined ? {} : { error: record.error }),
    });
  }
  return entries;
}
