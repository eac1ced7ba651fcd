import type { Attempt } from './fires.js';
import type { Holder, RunOutcome } from './claims.js';

/**
 * Typed listeners for one event: core's (a listener that throws is reported with
 * `process.emitWarning`, code `LEASEHOLD_LISTENER_ERROR`, and skipped; it never stops the others
 * or the scheduler).
 */
export { Listeners } from '@leasehold/core/internal';

/** Every event names the job and the fire. */
export interface FireEvent {
  /** The job, as named in `schedule()`. */
  job: string;
  /** The fire's instant, as the schedule computes it (the same on every replica). */
  fireTime: Date;
}

/** This replica claimed a fire: it will run it, with `token`. */
export interface ClaimedEvent extends FireEvent {
  /** The claim's fencing token: send it with every write the run makes. */
  token: bigint;
  /** Whether the fire was reached on time or is a missed one caught up. */
  attempt: Attempt;
}

/**
 * Why this replica did not run a fire:
 * - `'claimed-elsewhere'`: another replica claimed it (or already ran it): `holder` says who;
 * - `'overlap'`: with `overlap: 'skip'`, a run of the job was still going (`holder`: that run);
 * - `'misfire'`: this replica reached the fire too late (`lateToleranceMs`), e.g. after a stall.
 */
export type SkipReason = 'claimed-elsewhere' | 'overlap' | 'misfire';

/** A fire this replica did not run, and why. */
export interface SkippedEvent extends FireEvent {
  /** Why this replica did not run the fire. */
  reason: SkipReason;
  /** Who has the fire (claimed elsewhere) or the running marker (overlap); unknown for misfire. */
  holder?: Holder;
}

/** A run started. */
export type StartedEvent = ClaimedEvent;

/** A run ended; its record was written (or the write failed: see `onError`). */
export interface FinishedEvent extends ClaimedEvent {
  /** How long the run took, in ms. */
  durationMs: number;
  /** How the run ended, as recorded. */
  outcome: RunOutcome;
  /** What the run threw (`'error'`), or the reason its signal aborted. */
  error?: unknown;
}

/** The runner's lease was lost while the run was going (or before it could start). */
export interface LostEvent extends ClaimedEvent {
  /** The loss: core's `LeaseLostError`. */
  error: Error;
}

/** Something failed that the scheduler could not hand back to a caller (a claim, a record). */
export interface ErrorEvent {
  /** The job the failure is about. */
  job: string;
  /** The fire it is about, when there is one. */
  fireTime?: Date;
  /** What failed. */
  error: Error;
}
