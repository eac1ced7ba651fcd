/**
 * How much lease a critical section has left, and the refusal to start work that cannot finish
 * inside it: what `assertTimeLeft(ms)` of sessions, locks and leaderships share.
 */
import { InsufficientLeaseTimeError } from './errors.js';
import { invalid } from './options.js';

/** What `assertTimeLeft` reads: the time left (0 once lost) and the loss, if any. */
export interface TimeLeft {
  leftMs: number;
  lost: Error | undefined;
  /** What holds the time, for the message: `lock /k/…`, `session for lease 1a`. */
  what: string;
}

/**
 * Throws {@link InsufficientLeaseTimeError} when less than `neededMs` is left (always once lost,
 * with the loss as its cause); otherwise returns the time left. Bad `neededMs` throws
 * `InvalidArgumentError`.
 */
export function assertTimeLeft(neededMs: unknown, { leftMs, lost, what }: TimeLeft): number {
  if (typeof neededMs !== 'number' || !Number.isFinite(neededMs) || neededMs < 0) {
    throw invalid('assertTimeLeft(ms)', 'a non-negative, finite number of milliseconds', neededMs);
  }
  if (lost) {
    const message = `${what} is lost, so no time is left for work that needs ${neededMs} ms: ${lost.message}`;
    throw new InsufficientLeaseTimeError(neededMs, 0, message, { cause: lost });
  }
  if (leftMs < neededMs) {
    const message = `${what} has ${Math.floor(leftMs)} ms left before its lease's local deadline; the work needs ${neededMs} ms`;
    throw new InsufficientLeaseTimeError(neededMs, leftMs, message);
  }
  return leftMs;
}
