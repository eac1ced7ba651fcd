/**
 * Elections: etcd's Go `concurrency.Election`, key for key, on the same queue as locks. A
 * candidate is a key `<electionPrefix><election>/<lease id hex>` whose value is the candidate's
 * value; the leader is the candidate with the lowest create revision, which is also the term's
 * fencing token. `etcdctl elect` candidates and leasehold candidates share one election.
 */
import type { Clock } from './clock.js';
import { CampaignTimeoutError, LeadershipLostError, LeadershipResignedError } from './errors.js';
import { Hold, lossWhy } from './hold.js';
import { sessionFor, waitDeadline } from './mutex.js';
import { checkOptions, encodeName, validateValue } from './options.js';
import type { Entry, LostError, Queue } from './queue.js';
import type { LeaderState } from './observe.js';
import type { Session } from './session.js';

/** Options of `client.campaign(election, value, options)`; every field is optional. */
export interface CampaignOptions {
  /** Stop waiting when aborted; the promise rejects with `signal.reason`. */
  signal?: AbortSignal;
  /** Stop waiting after this many milliseconds with `CampaignTimeoutError`. Default: none. */
  timeoutMs?: number;
  /**
   * Campaign on this session instead of the client's shared one. A session resumed with
   * `leaseId` takes up the candidacy its lease already has, with its place and token.
   */
  session?: Session;
}

/** What campaigning needs from the client. */
export interface ElectionMaker {
  readonly elections: Queue;
  readonly clock: Clock;
  /** Aborts when the client is closed. */
  readonly closed: AbortSignal;
  sharedSession(signal?: AbortSignal): Promise<Session>;
  /** @internal Follows the election whose key segment is `segment` (see `client.observe()`). */
  observeSegment(segment: string, signal: AbortSignal): AsyncIterable<LeaderState>;
}

const lostError =
  (election: string): LostError =>
  (reason, entry, cause) => {
    const message = `leadership of ${JSON.stringify(election)} (${entry.key}, token ${entry.token}) is lost: ${lossWhy(reason, cause)}`;
    const options = cause ? { cause } : undefined;
    return new LeadershipLostError(reason, election, entry.key, entry.token, message, options);
  };

/**
 * Joins the election as a candidate with `value` and resolves once elected. Candidates are
 * elected in the order they joined. Rejects with `signal.reason` on abort, `CampaignTimeoutError`
 * after `timeoutMs`, the session's `LeaseLostError` if it is lost while waiting, and a
 * `LeadershipLostError` if the candidate's key vanishes; the candidacy is then withdrawn.
 */
export async function campaign(
  maker: ElectionMaker,
  election: string,
  value: string,
  options: CampaignOptions,
): Promise<Leadership> {
  return campaignAs(maker, candidate(election, value), options);
}

/** A validated candidacy: the election's name and key segment, and the value as given and as bytes. */
export interface Candidate {
  election: string;
  segment: string;
  value: string;
  bytes: Buffer;
}

/** Checks an election name and a candidate value once (`lead()` campaigns many times). */
export function candidate(election: string, value: string): Candidate {
  const segment = encodeName(election, 'election');
  return { election, segment, value, bytes: Buffer.from(validateValue('value', value)) };
}

/** {@link campaign} for a candidacy already checked. */
export function campaignAs(
  maker: ElectionMaker,
  { election, segment, value, bytes }: Candidate,
  options: CampaignOptions,
): Promise<Leadership> {
  const { telemetry } = maker.elections.etcd;
  const span = 'leasehold.election.campaign';
  return telemetry.acquisition('election', span, election, options, async (joined) => {
    checkOptions(options, ['signal', 'timeoutMs', 'session']);
    using timeout = waitDeadline(maker, options, (ms) => new CampaignTimeoutError(election, ms));
    const [session, signal] = await sessionFor(maker, options, timeout?.signal);
    const entry = await maker.elections.join(segment, session, {
      value: bytes,
      signal,
      lostError: lostError(election),
    });
    let leadership: Leadership;
    try {
      leadership = new Leadership(entry, election);
      // A resumed candidacy keeps its place; it runs with the value given now (as in Go).
      if (!entry.value.equals(bytes)) await leadership.proclaim(value);
    } catch (err) {
      void entry.remove('withdraw').catch(() => undefined);
      throw err;
    }
    joined(entry);
    await entry.waitFirst(signal);
    return leadership;
  });
}

/**
 * A term of leadership. `token` is the candidate key's create revision: like a lock's, it only
 * grows from term to term, so a resource that keeps the highest token it has seen refuses a
 * leader that lost the election without knowing it.
 *
 * `signal` aborts with a {@link LeadershipLostError} (`reason` `session`, `deleted` or
 * `overwritten`) when the term ends against the leader's will, and with
 * {@link LeadershipResignedError} on `resign()`.
 */
export class Leadership extends Hold<LeadershipLostError, LeadershipResignedError> {
  #value: string;
  #valueAt = 0n;

  /** @internal Use `client.campaign()`. */
  constructor(
    entry: Entry,
    /** The election's name as given to `campaign`. */
    readonly election: string,
  ) {
    super(entry);
    this.#value = entry.value.toString();
  }

  /** The value this leader last proclaimed (or campaigned with). */
  get value(): string {
    return this.#value;
  }

  /** True until the term ends (lost or resigned). */
  get isLeader(): boolean {
    return this.isHeld;
  }

  /**
   * Sets the leader's value, only while this term still owns its key: a stale leader's proclaim
   * rejects with `LeadershipLostError` and overwrites nothing. Observers see every proclaimed
   * value, in order. Resolves to the revision of the write. Not retried.
   */
  async proclaim(value: string): Promise<bigint> {
    const bytes = Buffer.from(validateValue('value', value));
    const put = {
      key: Buffer.from(this.key),
      value: bytes,
      lease: this.session.leaseId.toString(),
    };
    const revision = await this.txn('proclaim', [{ request_put: put }]);
    if (revision > this.#valueAt) [this.#value, this.#valueAt] = [value, revision];
    return revision;
  }

  /**
   * Ends the term: `signal` aborts at once, then the key is deleted only if it still has this
   * term's create revision, so the next candidate is elected at once and a late resign never
   * removes a later term. Idempotent; never throws for etcd's sake (see `Lock.release`).
   */
  resign(): Promise<void> {
    return this.end(
      'resign',
      () => new LeadershipResignedError(this.election, this.key, this.token),
    );
  }

  /** {@link Leadership.resign}, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.resign();
  }
}
