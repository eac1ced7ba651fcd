/**
 * `lead()`: a service's leader-only work as one call. Campaign; run the work while leader with a
 * signal that aborts when the term ends; after a loss, let the work stop and campaign again; on
 * shutdown, let the work drain for a bounded time, then resign so the next leader starts at once.
 */
import { anySignal, raceSignal, sleep, timeoutSignal, type Clock } from './clock.js';
import { campaignAs, candidate, type ElectionMaker, type Leadership } from './election.js';
import {
  ClientClosedError,
  isEtcdUnavailableError,
  isLeadershipLostError,
  isLeaseLostError,
  type LeaseholdError,
} from './errors.js';
import { LossLatch } from './latch.js';
import {
  checkOptions,
  defaults,
  invalid,
  MAX_TIMER_MS,
  tunables,
  validateDurationMs,
  validateSignal,
} from './options.js';
import type { Holder } from './hold.js';
import { assertSession, type Session } from './session.js';

/** What `lead()` hands to the leader-only work of each term. */
export interface LeaderContext {
  /** The term's fencing token: send it with every write the work makes. */
  token: bigint;
  /**
   * Aborts when the work must stop: the term was lost (`LeadershipLostError`, or the session's
   * `LeaseLostError` as its cause) or `lead()` was told to shut down (the shutdown signal's
   * reason). Reading it checks the session's deadline first.
   */
  signal: AbortSignal;
  /** The term itself: for `proclaim()`, `fencedWrite()`, `timeLeftMs()` and the rest. */
  leadership: Leadership;
}

/** Options of `client.lead(election, value, work, options)`; every field is optional. */
export interface LeadOptions {
  /**
   * Shuts down: stops campaigning, or, while leading, aborts the work's signal, waits up to
   * `drainTimeoutMs` for the work to return, and resigns. `lead()` then resolves.
   */
  signal?: AbortSignal;
  /** Campaign on this session instead of the client's shared one (ends `lead()` if lost). */
  session?: Session;
  /** Campaign again after a term is lost. Default true; if false, `lead()` rejects with the loss. */
  recampaign?: boolean;
  /**
   * How long the work may take to return after its signal aborts on shutdown before `lead()`
   * resigns without it. After a loss, the next term waits for the work however long it takes
   * (a warning is emitted once this has passed): one process never runs two terms at once.
   * Default 10000.
   */
  drainTimeoutMs?: number;
  /** Called when a term starts (for logs and metrics). */
  onElected?: (leadership: Leadership) => void;
  /** Called when a term is lost, or a campaign fails and is tried again. */
  onLost?: (error: LeaseholdError) => void;
  /**
   * Called with the election's leader whenever it changes, whoever it is (this process or
   * another; `undefined`: no leader), while `lead()` runs: client-go's `OnNewLeader`. It follows
   * `client.observe()`, so it also reports a leader this process waits behind.
   */
  onNewLeader?: (leader: Holder | undefined) => void;
  /**
   * After `work` returns while still leader: resign and campaign again (true), instead of
   * resigning and resolving (false; Curator's `autoRequeue`). Default false.
   */
  requeue?: boolean;
}

/**
 * The leader-only work `client.lead()` runs in each term. It should stop when `context.signal`
 * aborts; returning ends the term (see {@link LeadOptions.requeue}), throwing ends `lead()` with
 * that error.
 */
export type LeaderWork = (context: LeaderContext) => unknown;

/**
 * Runs `work` whenever this process leads `election`, until `options.signal` aborts (then it
 * resolves), `work` returns (it resigns and resolves) or throws while leader (it resigns and
 * rejects with that error), or an error that campaigning again cannot cure (client closed,
 * cluster changed, the given session lost, bad input).
 */
export async function lead(
  maker: ElectionMaker,
  election: string,
  value: string,
  work: LeaderWork,
  options: LeadOptions,
): Promise<void> {
  checkOptions(options, [
    'signal',
    'session',
    'recampaign',
    'drainTimeoutMs',
    'onElected',
    'onLost',
    'onNewLeader',
    'requeue',
  ]);
  const who = candidate(election, value);
  if (typeof work !== 'function') throw invalid('work', 'a function to run while leader', work);
  const shutdown = validateSignal(options.signal);
  const session = options.session === undefined ? undefined : assertSession(options.session);
  const recampaign = options.recampaign ?? true;
  if (typeof recampaign !== 'boolean') throw invalid('recampaign', 'a boolean', recampaign);
  const requeue = options.requeue ?? false;
  if (typeof requeue !== 'boolean') throw invalid('requeue', 'a boolean', requeue);
  const drainMs = validateDurationMs(
    'drainTimeoutMs',
    options.drainTimeoutMs ?? defaults.drainTimeoutMs,
    MAX_TIMER_MS,
  );
  for (const name of ['onElected', 'onLost', 'onNewLeader'] as const) {
    const fn = options[name];
    if (fn !== undefined && typeof fn !== 'function') throw invalid(name, 'a function', fn);
  }
  const notify = <T>(fn: ((value: T) => void) | undefined, value: T) => {
    try {
      fn?.(value);
    } catch (err) {
      process.emitWarning(`a lead() callback threw; it was skipped: ${String(err)}`, {
        code: 'LEASEHOLD_LISTENER_ERROR',
      });
    }
  };

  // Between sessions (etcd unreachable, retrying) nothing else may keep the process alive.
  const release = maker.clock.hold();
  // Once the client is closed or has met another cluster, a stuck work is waited for no longer.
  const ended = new AbortController();
  const changed = maker.elections.etcd.onChanged(() => ended.abort());
  const stopWaiting = anySignal(maker.closed, ended.signal);
  const stopObserving = new AbortController();
  const { onNewLeader } = options;
  if (onNewLeader) {
    const states = maker.observeSegment(who.segment, stopObserving.signal);
    void (async () => {
      for await (const { leader } of states) notify(onNewLeader, leader);
    })().catch(() => undefined); // ends with the client or another cluster: lead() says so
  }
  try {
    for (let delay: number = tunables.retryMinMs; !shutdown?.aborted;) {
      let leadership: Leadership;
      try {
        leadership = await campaignAs(maker, who, {
          ...(shutdown && { signal: shutdown }),
          ...(session && { session }),
        });
      } catch (err) {
        if (shutdown?.aborted) return;
        assertOpen(maker); // closed or another cluster: nothing to retry
        if (!curable(err, session)) throw err;
        notify(options.onLost, err as LeaseholdError);
        await sleep(maker.clock, delay, shutdown).catch(() => undefined);
        delay = Math.min(delay * 2, tunables.retryMaxMs);
        continue;
      }
      delay = tunables.retryMinMs;
      notify(options.onElected, leadership);
      const end = await term(maker.clock, leadership, work, { shutdown, stopWaiting }, drainMs);
      if (end.kind === 'lost') {
        notify(options.onLost, end.error);
        if (!recampaign || !curable(end.error, session)) throw end.error;
        assertOpen(maker);
        continue;
      }
      await leadership.resign();
      if (end.kind === 'threw') throw end.error;
      if (end.kind === 'returned' && requeue && !shutdown?.aborted) continue;
      return;
    }
  } finally {
    stopObserving.abort();
    changed[Symbol.dispose]();
    release();
  }
}

type TermEnd =
  | { kind: 'returned' | 'shutdown' }
  | { kind: 'threw'; error: unknown }
  | { kind: 'lost'; error: LeaseholdError };

/** Runs one term's work; settles when the work returned, or stopped (or timed out) after loss or shutdown. */
async function term(
  clock: Clock,
  leadership: Leadership,
  work: LeaderWork,
  signals: { shutdown: AbortSignal | undefined; stopWaiting: AbortSignal },
  drainMs: number,
): Promise<TermEnd> {
  const { shutdown } = signals;
  const stop = new LossLatch<Error>(() => {
    if (leadership.signal.aborted) stop.trip(leadership.signal.reason as Error);
  });
  const onLost = () => stop.trip(leadership.signal.reason as Error);
  const onShutdown = () => stop.trip(shutdown!.reason as Error);
  leadership.signal.addEventListener('abort', onLost, { once: true });
  shutdown?.addEventListener('abort', onShutdown, { once: true });
  if (leadership.signal.aborted) onLost();
  else if (shutdown?.aborted) onShutdown();
  // The term ended before its work could start (a shutdown or a loss right after the
  // election): the work is never handed a signal that is already aborted.
  if (stop.signal.aborted) return stopped(leadership, shutdown);
  const context = { token: leadership.token, signal: stop.signal, leadership };
  const running = (async () => work(context))().then(
    () => ({ threw: false, error: undefined }),
    (error: unknown) => ({ threw: true, error }),
  );
  try {
    const outcome = await raceSignal(running, stop.signal).catch(() => undefined);
    if (outcome && !leadership.signal.aborted) {
      return outcome.threw ? { kind: 'threw', error: outcome.error } : { kind: 'returned' };
    }
    // Lost or shutting down: the work was told to stop. On shutdown it gets drainTimeoutMs, then
    // lead() resigns without it. After a loss the next term's work must not start in this
    // process while the last one runs, so it is waited for (with a warning once drainTimeoutMs
    // has passed), unless a shutdown comes meanwhile or the client ends.
    using drain = timeoutSignal(clock, drainMs, () => new Error('drain timeout'));
    const drained = await raceSignal(running, drain.signal).catch(() => undefined);
    if (!drained) {
      const next = shutdown?.aborted ? 'resigning without it' : 'waiting for it to return';
      process.emitWarning(
        `lead(${JSON.stringify(leadership.election)}): the leader's work did not return within drainTimeoutMs (${drainMs} ms) after its signal aborted; ${next}`,
        { code: 'LEASEHOLD_DRAIN_TIMEOUT' },
      );
      if (!shutdown?.aborted) {
        const until = anySignal(shutdown, signals.stopWaiting);
        await raceSignal(running, until).catch(() => undefined);
      }
    }
    return stopped(leadership, shutdown);
  } finally {
    leadership.signal.removeEventListener('abort', onLost);
    shutdown?.removeEventListener('abort', onShutdown);
  }
}

/** How a term that was told to stop ended: shut down (or resigned), or lost. */
function stopped(leadership: Leadership, shutdown: AbortSignal | undefined): TermEnd {
  const lost = leadership.signal.reason as LeaseholdError;
  if (shutdown?.aborted || !leadership.signal.aborted || lost.code === 'LEADERSHIP_RESIGNED') {
    return { kind: 'shutdown' };
  }
  return { kind: 'lost', error: lost };
}

/** Throws `ClientClosedError` once the client is closing, `ClusterChangedError` after a change. */
function assertOpen(maker: ElectionMaker): void {
  if (maker.closed.aborted) throw new ClientClosedError();
  maker.elections.etcd.assertUsable();
}

/** Whether campaigning again can cure `err`: etcd was unreachable, or a term or lease was lost. */
function curable(err: unknown, session: Session | undefined): boolean {
  if (isEtcdUnavailableError(err) || isLeadershipLostError(err)) return !session?.isLost;
  if (isLeaseLostError(err))
    return err.reason !== 'cluster-changed' && err.reason !== 'closed' && !session;
  return false;
}
