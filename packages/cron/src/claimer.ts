/**
 * Every etcd call of the package: claiming a fire, recording how its run ended, reading the
 * history. Shared by the scheduler and the node-cron coordinator, so both make the same claims.
 * Calls go through `kvCall` from `@leasehold/core/internal`: each has a deadline, only idempotent
 * ones are retried, and an answer from a changed cluster is never handed on.
 */
import { randomUUID } from 'node:crypto';
import { isEtcdUnavailableError, type Leasehold, type Session } from '@leasehold/core';
import { kvCall } from '@leasehold/core/internal';
import {
  claimRequest,
  decodeRecord,
  finishRequest,
  historyRequest,
  readClaim,
  readHistory,
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

export interface Claim {
  job: string;
  keys: JobKeys;
  fireMs: number;
  attempt: Attempt;
  overlap: OverlapPolicy;
  token: bigint;
  record: FireRecord;
}

export class Claimer {
  /** This scheduler's own id in records: how a retried claim recognises its own first attempt. */
  readonly instance = randomUUID();
  readonly #retention: RetentionLeases;

  constructor(
    private readonly client: Leasehold,
    readonly runner: string,
    private readonly now: () => Date,
  ) {
    this.#retention = new RetentionLeases(client);
  }

  /**
   * Claims a fire with one transaction (retried only when its outcome is unknown, which is safe:
   * a retry adopts the record its first attempt wrote). If etcd refuses it because a lease is
   * gone, tries once more with a fresh retention lease (the runner's lease is the caller's).
   */
  async claim(input: {
    job: string;
    keys: JobKeys;
    fireMs: number;
    attempt: Attempt;
    overlap: OverlapPolicy;
    retentionSeconds: number;
    session: Session;
  }): Promise<{ result: ClaimResult; claim?: Claim }> {
    const { job, keys, fireMs, attempt, overlap, retentionSeconds, session } = input;
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
    for (let attemptNo = 0; ; attemptNo++) {
      const retentionLease = await this.#retention.lease(retentionSeconds);
      const request = claimRequest({
        keys,
        fireMs,
        overlap,
        runnerLease: session.leaseId,
        retentionLease,
        record,
      });
      try {
        const res = await kvCall(
          this.client,
          `claim of job ${JSON.stringify(job)} at ${record.fireTime}`,
          (kv, o) => kv.txn(request, o),
          { idempotent: true },
        );
        const result = readClaim(res, this.instance);
        if (result.kind !== 'claimed') return { result };
        return {
          result,
          claim: { job, keys, fireMs, attempt, overlap, token: result.token, record },
        };
      } catch (err) {
        if (attemptNo === 0 && /lease not found/i.test(String((err as Error)?.message))) {
          this.#retention.forget(retentionLease);
          continue;
        }
        // Unknown outcome: the txn may still land (etcd applies a delayed request however late
        // it arrives). A claim nobody runs would keep its running marker on a live lease and
        // block the job everywhere: find it once etcd answers and record it as not run.
        if (isEtcdUnavailableError(err)) this.#settle({ job, keys, fireMs, attempt, overlap });
        throw err;
      }
    }
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
    const once = () =>
      kvCall(
        this.client,
        `record of job ${JSON.stringify(claim.job)} at ${record.fireTime}`,
        (kv, o) => kv.txn(request, o),
        { idempotent: true },
      );
    try {
      await once();
      return;
    } catch (err) {
      onError(err as Error);
      if (!isEtcdUnavailableError(err)) return;
    }
    const giveUpAt = performance.now() + RETRY_FOR_MS;
    void (async () => {
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
