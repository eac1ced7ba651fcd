/**
 * Which etcd endpoint a call or a stream went to, for log lines. etcd3 picks a member per call
 * and runs the call through that member's policy; wrapping each member's policy marks what comes
 * back (a stream, an answer, or the error etcd3 then hands on unchanged) with the member's
 * endpoint. (An async context would also work, but on Node 20 it slows every promise in the
 * process.)
 *
 * Log lines from here: a member that stops answering (once, when it starts failing: the calls
 * that follow go to the other members) and answers again; each retry of a call, with the member
 * its last attempt failed on.
 */
import { GRPCCancelledError, GRPCDeadlineExceededError, isRecoverableError } from 'etcd3';
import type { Clock } from './clock.js';
import { errField, type Logger } from './logger.js';

/** The one method of a member policy etcd3 calls. */
interface Policy {
  execute<T>(fn: () => T | Promise<T>): Promise<T>;
}

/** Streams, answers and failures by the endpoint they came from. */
const endpoints = new WeakMap<object, string>();

/** A failure that says the member did not answer (as opposed to an answer that refused). */
const unanswered = (err: unknown) =>
  err instanceof GRPCDeadlineExceededError ||
  (err instanceof Error && isRecoverableError(err) && !(err instanceof GRPCCancelledError));

/**
 * Wraps `policy` (a member's) so that calls and streams remember `endpoint`, and logs when the
 * member starts failing and when it answers again.
 */
export function watchMember<P extends Policy>(endpoint: string, policy: P, log: Logger): P {
  let failing = false;
  const execute = async <T>(fn: () => T | Promise<T>): Promise<T> => {
    let sent = false;
    try {
      const result = await policy.execute(() => {
        sent = true;
        return fn();
      });
      if (typeof result === 'object' && result !== null) {
        endpoints.set(result, endpoint);
        // Opening a stream is local; only a unary answer shows the member is back.
        if (failing && 'header' in result) {
          failing = false;
          log.info({ endpoint }, 'etcd member answers again');
        }
      }
      return result;
    } catch (err) {
      // Only a failure of a call sent there is the member's (a resting member's refusal is not).
      if (sent && typeof err === 'object' && err !== null) endpoints.set(err, endpoint);
      if (!sent) {
        log.debug({ endpoint }, 'etcd member skipped: it is resting after failures');
      } else if (unanswered(err) && !failing) {
        failing = true;
        log.warn(
          { endpoint, err: errField(err) },
          'etcd member did not answer; calls fail over to the other members until it answers again',
        );
      } else if (!unanswered(err) && failing && !(err instanceof GRPCCancelledError)) {
        failing = false; // a refusal is an answer
        log.info({ endpoint }, 'etcd member answers again');
      }
      throw err;
    }
  };
  return Object.assign(Object.create(policy) as P, { execute });
}

/** The endpoint a stream was opened on, or an error (or its causes) came from. */
export function endpointOf(value: unknown): string | undefined {
  for (let v = value, depth = 0; depth < 5 && typeof v === 'object' && v !== null; depth++) {
    const found = endpoints.get(v);
    if (found !== undefined) return found;
    v = (v as { cause?: unknown }).cause;
  }
  return undefined;
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
