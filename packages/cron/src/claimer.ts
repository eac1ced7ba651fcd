/**
 * Every etcd call of the package: claiming a fire, recording how its run ended, reading the
 * history. Shared by the scheduler and the node-cron coordinator, so both make the same claims.
 * Calls go through `kvCall` from `@leasehold/core/internal`: each has a deadline, only idempotent
 * ones are retried, and an answer from a changed cluster is never handed on.
 */
import { randomUUID } from 'node:crypto';
import { isEtcdUnavailableError, type Leasehold, type Session } from '@leasehold/core';
import { callTimeoutMs, kvCall } from '@leasehold/core/internal';
import {
  claimRequest,
  decodeRecord,
  finishRequest,
  historyRequest,
  markerRequest,
  readClaim,
  readHistory,
  readMarker,
  replacerOf,
  type ClaimResult,
  type FireRecord,
  type HistoryEntry,
  type JobKeys,
  type RunOutcome,
} from './claims.js';
import { fireId, type Attempt } from './fires.js';
import type { OverlapPolicy } from './options.js';
import { RetentionLeases } from './retention.js';

/** Backoff of background record writes, doubling from min to max. */
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 1_000;
/** Background record writes give up after this long: the record then stays "running". */
const RETRY_FOR_MS = 10 * 60_000;
/** After etcd answered once, a claim whose answer was lost is looked for once more this late. */
const SETTLE_AGAIN_MS = 3_000;

/** A claim not sent: it could not land before another replica's record of the fire may expire. */
export interface TooLate {
  kind: 'too-late';
  /** How late the fire was, by this replica's clock, when the claim was to be sent. */
  lateMs: number;
}

export interface Claim {
  job: string;
  keys: JobKeys;
  fireMs: number;
  attempt: Attempt;
  overlap: OverlapPolicy;
  token: bigint;
  record: FireRecord;
  /**
   * Under `overlap: 'replace'`, a claim adopted on a retry (its first answer was lost) whose
   * running marker a later claim had rewritten meanwhile: replaced before it started, by the
   * run the marker names (`{}` if a later run already ended and removed it).
   */
  replacedBy?: { fireTime?: string; runner?: string; token?: bigint };
}

export class Claimer {
  /** This scheduler's own id in records: how a retried claim recognises its own first attempt. */
  readonly instance = randomUUID();
  readonly #retention: RetentionLeases;
  /**
   * Record keys of the fires this instance is claiming or running, until their record is
   * written: a running marker of this instance for any other fire is an orphan (a claim whose
   * answer was lost and that landed later), which nobody would ever finish.
   */
  readonly #live = new Set<string>();

  constructor(
    private readonly client: Leasehold,
    readonly runner: string,
    private readonly now: () => Date,
    /** The most replicas' clocks may disagree (see `checkRetention` in options.ts). */
    private readonly maxClockSkewMs: number,
  ) {
    this.#retention = new RetentionLeases(client);
  }

  /**
   * Claims a fire with one transaction (retried only when its outcome is unknown, which is safe:
   * a retry adopts the record its first attempt wrote). If etcd refuses it because a lease is
   * gone, tries once more with a fresh retention lease (the runner's lease is the caller's).
   *
   * Before each attempt it checks that the claim can land before a record of the fire made by
   * another replica could expire: such a record was made no earlier than the fire, by a clock
   * at most `maxClockSkewMs` ahead of this one, and lives `retentionSeconds`. The attempt gets
   * what is left of that as its deadline, if less than `callTimeoutMs`. A claim that could not
   * is not sent (`too-late`): however long the process stalled between planning and claiming,
   * it never claims a fire whose record may be gone.
   */
  async claim(input: {
    job: string;
    keys: JobKeys;
    fireMs: number;
    attempt: Attempt;
    overlap: OverlapPolicy;
    retentionSeconds: number;
    session: Session;
  }): Promise<{ result: ClaimResult | TooLate; claim?: Claim }> {
    const { job, keys, fireMs, attempt, overlap, retentionSeconds, session } = input;
    const live = keys.record(fireMs);
    const record: FireRecord = {
      v: 1,
      job,
      fireTime: fireId(fireMs),
      runner: this.runner,
      instance: this.instance,
      attempt,
      claimedAt: this.now().toISOString(),
      state: 'running',
    };
    this.#live.add(live);
    let claimed = false;
    try {
      /** What is left until another replica's record of the fire may expire, by this clock. */
      const budget = () => {
        const nowMs = this.now().getTime();
        return { nowMs, budgetMs: fireMs + retentionSeconds * 1000 - this.maxClockSkewMs - nowMs };
      };
      const tooLate = (nowMs: number) => ({
        result: { kind: 'too-late' as const, lateMs: nowMs - fireMs },
      });
      for (let leaseRetried = false, healed = false; ;) {
        const early = budget();
        if (early.budgetMs <= 0) return tooLate(early.nowMs);
        const retentionLease = await this.#retention.lease(retentionSeconds);
        // Again after the last wait before the send: a stall during the grant counts too.
        const { nowMs, budgetMs } = budget();
        if (budgetMs <= 0) return tooLate(nowMs);
        const request = claimRequest({
          keys,
          fireMs,
          overlap,
          runnerLease: session.leaseId,
          retentionLease,
          record,
        });
        let result: ClaimResult;
        // Set when a retried attempt finds no time left: it is not sent.
        let ranOutAt: number | undefined;
        try {
          const res = await kvCall(
            this.client,
            `claim of job ${JSON.stringify(job)} at ${record.fireTime}`,
            (kv, o) => {
              // Each attempt (kvCall retries one whose answer was lost) is checked and capped
              // on its own: a retry goes out after the time left when the first one was sent.
              const left = budget();
              if (left.budgetMs <= 0) {
                ranOutAt = left.nowMs;
                throw new Error('no time left to claim the fire before its record may expire');
              }
              return kv.txn(request, {
                deadline: Math.min(o.deadline, Date.now() + left.budgetMs),
              });
            },
            { idempotent: true, timeoutMs: Math.min(callTimeoutMs(this.client), budgetMs) },
          );
          result = readClaim(res, this.instance);
        } catch (err) {
          if (ranOutAt !== undefined) {
            // An earlier attempt's outcome is unknown: if it landed, it is recorded as not run.
            this.#settle({ job, keys, fireMs, attempt, overlap });
            return tooLate(ranOutAt);
          }
          if (!leaseRetried && /lease not found/i.test(String((err as Error)?.message))) {
            this.#retention.forget(retentionLease);
            leaseRetried = true;
            continue;
          }
          // Unknown outcome: the txn may still land (etcd applies a delayed request however
          // late it arrives). A claim nobody runs would keep its running marker on a live lease
          // and block the job everywhere: find it once etcd answers and record it as not run.
          if (isEtcdUnavailableError(err)) this.#settle({ job, keys, fireMs, attempt, overlap });
          throw err;
        }
        if (
          result.kind === 'overlap' &&
          !healed &&
          (await this.#healOrphan(job, keys, overlap, result))
        ) {
          healed = true;
          continue;
        }
        if (result.kind !== 'claimed') return { result };
        claimed = true;
        const claim: Claim = { job, keys, fireMs, attempt, overlap, token: result.token, record };
        if (overlap === 'replace' && result.adopted && result.marker?.token !== result.token) {
          claim.replacedBy = replacerOf(result.marker);
        }
        return { result, claim };
      }
    } finally {
      // A claim won stays live until its record is written (finish).
      if (!claimed) this.#live.delete(live);
    }
  }

  /**
   * The running marker that made a claim fail names a run of this very instance that it is not
   * claiming or running: a claim whose answer was lost landed after `#settle` stopped looking
   * for it. Nobody would ever finish it, and with `overlap: 'skip'` it would block the job on
   * every replica for as long as this runner's lease lives. Records it `lost` (which removes its
   * claim and marker, guarded by its token); true if the claim may be tried again.
   */
  async #healOrphan(
    job: string,
    keys: JobKeys,
    overlap: OverlapPolicy,
    found: Extract<ClaimResult, { kind: 'overlap' }>,
  ): Promise<boolean> {
    const { fireTime, token } = found.holder;
    if (found.instance !== this.instance || fireTime === undefined || token === undefined) {
      return false;
    }
    const fireMs = Date.parse(fireTime);
    if (!Number.isFinite(fireMs) || this.#live.has(keys.record(fireMs))) return false;
    const res = await kvCall(
      this.client,
      `record of job ${JSON.stringify(job)} at ${fireTime}`,
      (kv, o) => kv.range({ key: Buffer.from(keys.record(fireMs)) }, o),
      { idempotent: true },
    );
    const kv = res.kvs[0];
    const record = decodeRecord(kv?.value);
    if (!kv || BigInt(kv.create_revision) !== token || record?.instance !== this.instance) {
      return false;
    }
    if (record.state !== 'running') return false;
    const orphan: Claim = {
      job: record.job,
      keys,
      fireMs,
      attempt: record.attempt,
      overlap,
      token,
      record,
    };
    const error = 'its claim landed after the claimer had given up on it; not run';
    let failed = false;
    await this.finish(orphan, { outcome: 'lost', durationMs: 0, error }, () => (failed = true));
    return !failed;
  }

  /**
   * Is the run of `claim` still the job's current one (`overlap: 'replace'`)? False once a
   * later claim rewrote the running marker (or it is gone); the marker as found is returned.
   */
  async current(claim: Claim): Promise<{ current: boolean; by?: ReturnType<typeof readMarker> }> {
    const res = await kvCall(
      this.client,
      `running marker of job ${JSON.stringify(claim.job)}`,
      (kv, o) => kv.range(markerRequest(claim.keys), o),
      { idempotent: true },
    );
    const marker = readMarker(res.kvs[0]);
    return { current: marker?.token === claim.token, ...(marker ? { by: marker } : {}) };
  }

  /**
   * Looks, in the background, for a claim of this instance whose answer was lost, and records
   * it `lost` (which deletes its claim and running marker). Checks until etcd has answered twice
   * a few seconds apart, or ten minutes pass.
   */
  #settle(fire: Omit<Claim, 'token' | 'record'>): void {
    const recordKey = Buffer.from(fire.keys.record(fire.fireMs));
    const giveUpAt = performance.now() + RETRY_FOR_MS;
    void (async () => {
      let answered = 0;
      for (let delay = RETRY_MIN_MS; performance.now() < giveUpAt && answered < 2;) {
        await new Promise((resolve) => setTimeout(resolve, delay).unref());
        let kv;
        try {
          const res = await kvCall(
            this.client,
            `record of job ${JSON.stringify(fire.job)} at ${fireId(fire.fireMs)}`,
            (client, o) => client.range({ key: recordKey }, o),
            { idempotent: true },
          );
          kv = res.kvs[0];
        } catch (err) {
          if (!isEtcdUnavailableError(err)) return;
          delay = Math.min(delay * 2, RETRY_MAX_MS);
          continue;
        }
        const record = decodeRecord(kv?.value);
        if (kv && record?.instance === this.instance && record.state === 'running') {
          const claim = { ...fire, token: BigInt(kv.create_revision), record };
          const error = 'its claim landed after the claimer had given up on it; not run';
          return this.finish(claim, { outcome: 'lost', durationMs: 0, error }, () => {});
        }
        answered++;
        delay = SETTLE_AGAIN_MS; // a delayed txn may still be on its way
      }
    })();
  }

  /**
   * Writes how a run ended into its record and deletes its claim (and running marker). Resolves
   * after the first attempt; if etcd could not be reached, `onError` hears of it and the write
   * is retried in the background (unref'd timers: it never keeps the process alive) until it
   * lands, etcd refuses it, or ten minutes pass. Until then, with `overlap: 'skip'`, the running
   * marker stays, as long as the runner's lease lives.
   */
  async finish(
    claim: Claim,
    ended: { outcome: RunOutcome; durationMs: number; error?: string },
    onError: (error: Error) => void,
  ): Promise<void> {
    const record: FireRecord = {
      ...claim.record,
      state: 'finished',
      outcome: ended.outcome,
      durationMs: Math.round(ended.durationMs),
      ...(ended.error === undefined ? {} : { error: ended.error }),
    };
    const request = finishRequest({ ...claim, record });
    const done = () => void this.#live.delete(claim.keys.record(claim.fireMs));
    const once = () =>
      kvCall(
        this.client,
        `record of job ${JSON.stringify(claim.job)} at ${record.fireTime}`,
        (kv, o) => kv.txn(request, o),
        { idempotent: true },
      );
    try {
      await once();
      return done();
    } catch (err) {
      onError(err as Error);
      if (!isEtcdUnavailableError(err)) return done();
    }
    const giveUpAt = performance.now() + RETRY_FOR_MS;
    void (async () => {
      try {
        for (let delay = RETRY_MIN_MS; performance.now() < giveUpAt;) {
          await new Promise((resolve) => setTimeout(resolve, delay).unref());
          try {
            await once();
            return;
          } catch (err) {
            if (!isEtcdUnavailableError(err)) return onError(err as Error);
          }
          delay = Math.min(delay * 2, RETRY_MAX_MS);
        }
      } finally {
        done();
      }
    })();
  }

  /** The newest `limit` records of a job, newest first, with live claims resolved at one read. */
  async history(job: string, keys: JobKeys, limit: number): Promise<HistoryEntry[]> {
    const res = await kvCall(
      this.client,
      `history of job ${JSON.stringify(job)}`,
      (kv, o) => kv.txn(historyRequest(keys, limit), o),
      { idempotent: true },
    );
    return readHistory(res, keys, job);
  }
}
