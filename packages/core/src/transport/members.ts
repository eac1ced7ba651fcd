/**
 * Which etcd members a call may go to, and which member a call, a stream or a failure came from.
 * etcd3 sends each call to a member picked at random and runs it through that member's policy;
 * a policy that refuses (a broken-circuit error, before the call is sent) makes etcd3 try the
 * next member.
 *
 * A member that let a call run into its deadline, or whose stream had to be dropped unanswered,
 * is frozen, cut off, or waiting for a leader that is gone: every call sent there costs a whole
 * deadline. It rests — no calls while another member is usable — for `hangRestMs`, doubling
 * with each further hang up to `hangRestMaxMs`, until it answers a call again. A member that
 * refused connections `fastFailures` times in a row rests `fastRestMs` (it fails fast, so a
 * short rest is enough to send the next call elsewhere). When every member rests, calls go to
 * the one whose rest ends first: trying is better than failing without asking.
 *
 * A stream that stays unanswered (a keepalive, a watch create or progress request) says the same
 * as a hung call, often first: a session renews every TTL/3, while a fresh call may not have gone
 * to the member yet. The SDK reports it ({@link Members.stuck}) so the next call and the stream
 * opened in its place already go elsewhere. A stream's answer ({@link Members.answered}) clears
 * a member the same way a call's does.
 *
 * A rest that ran out does not make a member that hung as good as one that has answered since:
 * while any member is clean (no hang since its last answer, not resting), calls go to the clean
 * ones. After a leader is lost every member hangs for the election; the healthy ones answer
 * (keepalives first) as soon as a new leader is elected, the frozen one never does, so its rest
 * running out no longer sends it a call that would hang another attempt.
 *
 * Log lines from here: a member that stops answering (once, when it starts failing: the calls
 * that follow go to the other members) and answers again; each retry of a call, with the member
 * its last attempt failed on. (Endpoints are remembered per object rather than in an async
 * context: on Node 20 that slows every promise in the process.)
 */
import { BrokenCircuitError } from 'cockatiel';
import { GRPCCancelledError, GRPCDeadlineExceededError, isRecoverableError } from 'etcd3';
import type { Clock } from '../clock.js';
import { errField, silentLogger, type Logger } from '../logger.js';
import { tunables } from '../options.js';

export const memberRest = {
  hangRestMs: 1_000,
  hangRestMaxMs: 30_000,
  fastFailures: 3,
  fastRestMs: tunables.breakerHalfOpenMs,
} as const;

/**
 * What a failure says about the member it came from, the one classification of gRPC failures:
 * - `down`: it did not answer before the deadline, or nothing listens (connection refused);
 * - `dropped`: the call or stream was cancelled (by this client, usually because it hung);
 * - `refused`: the connection failed otherwise (reset, closing): it fails fast;
 * - `answered`: the member answered, if with a refusal: it is alive.
 */
export type Verdict = 'down' | 'dropped' | 'refused' | 'answered';

export function verdictOf(err: unknown): Verdict {
  if (err instanceof GRPCDeadlineExceededError) return 'down';
  if (err instanceof GRPCCancelledError) return 'dropped';
  if (!(err instanceof Error) || !isRecoverableError(err)) return 'answered';
  return /No connection established/.test(err.message) ? 'down' : 'refused';
}

interface State {
  endpoint: string | undefined;
  restUntil: number;
  hangs: number;
  fast: number;
  /** Logged as not answering; cleared (and logged) by its next answer. */
  failing: boolean;
}

/** The one method of a cockatiel policy etcd3 calls for a member. */
export interface MemberPolicy {
  execute<T>(fn: () => T | Promise<T>): Promise<T>;
}

/** Streams, answers and failures by the endpoint they came from. */
const endpoints = new WeakMap<object, string>();

/** The endpoint a stream was opened on, or an error (or its causes) came from. */
export function endpointOf(value: unknown): string | undefined {
  for (let v = value, depth = 0; depth < 5 && typeof v === 'object' && v !== null; depth++) {
    const found = endpoints.get(v);
    if (found !== undefined) return found;
    v = (v as { cause?: unknown }).cause;
  }
  return undefined;
}

const isAnswer = (result: unknown): boolean =>
  typeof result === 'object' && result !== null && 'header' in result;

export class Members {
  readonly #states: State[] = [];
  readonly #byEndpoint = new Map<string, State>();

  constructor(
    private readonly clock: Clock,
    private readonly rest: typeof memberRest = memberRest,
    private readonly log: Logger = silentLogger,
  ) {}

  /** A new member's policy (etcd3 asks once per endpoint). */
  add(endpoint?: string): MemberPolicy {
    const state: State = { endpoint, restUntil: 0, hangs: 0, fast: 0, failing: false };
    this.#states.push(state);
    if (endpoint !== undefined) this.#byEndpoint.set(endpoint, state);
    return { execute: (fn) => this.#execute(state, fn) };
  }

  /**
   * A stream on `endpoint` went unanswered past its deadline: the member rests at once, as when
   * the stream is cancelled (which etcd3 reports later, after the stream opened in its place may
   * already have gone back to the same member; then not counted twice).
   */
  stuck(endpoint: string | undefined): void {
    const state = endpoint === undefined ? undefined : this.#byEndpoint.get(endpoint);
    if (state) this.#dropped(state, this.clock.now());
  }

  /** A stream on `endpoint` was answered: the member is alive and has a leader. */
  answered(endpoint: string | undefined): void {
    const state = endpoint === undefined ? undefined : this.#byEndpoint.get(endpoint);
    if (state) this.#clear(state);
  }

  #clear(state: State): void {
    Object.assign(state, { restUntil: 0, hangs: 0, fast: 0 });
    this.#back(state);
  }

  /** Logs that a member logged as failing answers again. */
  #back(state: State): void {
    if (!state.failing) return;
    state.failing = false;
    this.log.info({ endpoint: state.endpoint }, 'etcd member answers again');
  }

  /**
   * A stream this client dropped unanswered: frozen, or waiting for a leader (then the member is
   * fine once one is elected), so a single rest, not a growing one, and none while resting.
   */
  #dropped(state: State, now: number): void {
    if (now < state.restUntil) return;
    state.hangs++;
    state.restUntil = now + this.rest.hangRestMs;
  }

  /**
   * Whether a call may go to the member with this state now: if it is clean; if its rest is over
   * and no member is clean; or if every member rests and it has let the fewest calls hang since
   * it last answered, its rest ending first among those (after a leader loss every member may
   * have let a call hang, but only a frozen member goes on hanging once a new leader is elected).
   */
  #usable(state: State, now: number): boolean {
    const clean = (s: State) => s.hangs === 0 && now >= s.restUntil;
    if (clean(state)) return true;
    if (now >= state.restUntil) return !this.#states.some(clean);
    const before = (a: State, b: State) =>
      a.hangs < b.hangs || (a.hangs === b.hangs && a.restUntil < b.restUntil);
    return this.#states.every((s) => now < s.restUntil && !before(s, state));
  }

  async #execute<T>(state: State, fn: () => T | Promise<T>): Promise<T> {
    const { endpoint } = state;
    if (!this.#usable(state, this.clock.now())) {
      this.log.debug({ endpoint }, 'etcd member skipped: it is resting after failures');
      throw new BrokenCircuitError();
    }
    let result: T;
    try {
      result = await fn();
    } catch (err) {
      if (endpoint !== undefined && typeof err === 'object' && err !== null) {
        endpoints.set(err, endpoint);
      }
      this.#failed(state, err);
      throw err;
    }
    if (endpoint !== undefined && typeof result === 'object' && result !== null) {
      endpoints.set(result, endpoint);
    }
    // Opening a stream is local: only an answer (a unary response) shows the member is alive.
    if (isAnswer(result)) this.#clear(state);
    return result;
  }

  #failed(state: State, err: unknown): void {
    const now = this.clock.now();
    const verdict = verdictOf(err);
    if (verdict === 'down') {
      const ms = Math.min(this.rest.hangRestMaxMs, this.rest.hangRestMs * 2 ** state.hangs);
      state.hangs++;
      state.restUntil = Math.max(state.restUntil, now + ms);
    } else if (verdict === 'dropped') {
      return this.#dropped(state, now);
    } else if (verdict === 'refused') {
      if (++state.fast >= this.rest.fastFailures) {
        state.fast = 0;
        state.restUntil = Math.max(state.restUntil, now + this.rest.fastRestMs);
      }
    } else {
      state.fast = 0; // an answer, if a refusal: the member is alive
      return this.#back(state);
    }
    if (!state.failing) {
      state.failing = true;
      this.log.warn(
        { endpoint: state.endpoint, err: errField(err) },
        'etcd member did not answer; calls fail over to the other members until it answers again',
      );
    }
  }
}

/**
 * Wraps one call's attempt function (what a retry policy runs) so that every attempt after the
 * first is logged: what is retried, the attempt number, how long after the failure, and the
 * endpoint and error the last attempt failed with.
 */
export function logRetries<A extends unknown[], T>(
  log: Logger,
  clock: Clock,
  what: string,
  run: (...args: A) => Promise<T>,
): (...args: A) => Promise<T> {
  let attempts = 0;
  let last: { endpoint: string | undefined; err: unknown; at: number } | undefined;
  return (...args) => {
    attempts++;
    if (last) {
      const { endpoint, err, at } = last;
      log.warn(
        {
          what,
          attempt: attempts,
          delayMs: Math.round(clock.now() - at),
          ...(endpoint === undefined ? {} : { endpoint }),
          err: errField(err),
        },
        `retrying etcd ${what}`,
      );
    }
    return run(...args).catch((err: unknown) => {
      last = { endpoint: endpointOf(err), err, at: clock.now() };
      throw err;
    });
  };
}
