import { InvalidArgumentError } from './errors.js';

/**
 * A one-way "lost" switch: an AbortSignal that aborts once with a typed reason, plus typed
 * listeners. A listener that throws is reported and skipped; it never stops the others or
 * the SDK's own bookkeeping.
 */
export class LossLatch<E extends Error> {
  readonly #controller = new AbortController();
  readonly #listeners = new Set<(reason: E) => void>();

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  get reason(): E | undefined {
    return this.#controller.signal.aborted ? (this.#controller.signal.reason as E) : undefined;
  }

  /** Trips the latch; later calls are ignored. Returns whether this call tripped it. */
  trip(reason: E): boolean {
    if (this.#controller.signal.aborted) return false;
    this.#controller.abort(reason);
    for (const listener of [...this.#listeners]) {
      try {
        listener(reason);
      } catch (err) {
        reportListenerError(err);
      }
    }
    this.#listeners.clear();
    return true;
  }

  /**
   * Calls `listener` once when the latch trips; immediately (in a microtask) if it already has.
   * The returned disposable removes the listener.
   */
  on(listener: (reason: E) => void): Disposable {
    if (typeof listener !== 'function') {
      throw new InvalidArgumentError(`listener must be a function, got ${typeof listener}`);
    }
    const reason = this.reason;
    if (reason !== undefined) {
      queueMicrotask(() => {
        try {
          listener(reason);
        } catch (err) {
          reportListenerError(err);
        }
      });
      return { [Symbol.dispose]: () => undefined };
    }
    this.#listeners.add(listener);
    return { [Symbol.dispose]: () => void this.#listeners.delete(listener) };
  }
}

function reportListenerError(err: unknown): void {
  process.emitWarning(
    `a leasehold event listener threw; it was skipped: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
    { code: 'LEASEHOLD_LISTENER_ERROR' },
  );
}
