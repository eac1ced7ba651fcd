import { InvalidArgumentError } from './errors.js';

/**
 * Typed listeners for an SDK event. A listener that throws is reported with
 * `process.emitWarning` and skipped; it never stops the others or the SDK's own bookkeeping.
 */
export class Listeners<T> {
  readonly #set = new Set<(value: T) => void>();

  add(listener: (value: T) => void): Disposable {
    if (typeof listener !== 'function') {
      throw new InvalidArgumentError(`listener must be a function, got ${typeof listener}`);
    }
    const entry = (value: T) => listener(value);
    this.#set.add(entry);
    return { [Symbol.dispose]: () => void this.#set.delete(entry) };
  }

  emit(value: T): void {
    for (const listener of [...this.#set]) {
      try {
        listener(value);
      } catch (err) {
        process.emitWarning(
          `a leasehold event listener threw; it was skipped: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
          { code: 'LEASEHOLD_LISTENER_ERROR' },
        );
      }
    }
  }

  get size(): number {
    return this.#set.size;
  }

  clear(): void {
    this.#set.clear();
  }
}

/**
 * A one-way "lost" switch: an AbortSignal that aborts once with a typed reason, plus listeners
 * called once when it trips (at once, in a microtask, if it already has).
 */
export class LossLatch<E extends Error> {
  readonly #controller = new AbortController();
  readonly #listeners = new Listeners<E>();

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
    this.#listeners.emit(reason);
    this.#listeners.clear();
    return true;
  }

  on(listener: (reason: E) => void): Disposable {
    const reason = this.reason;
    if (reason === undefined) return this.#listeners.add(listener);
    const late = new Listeners<E>();
    const disposable = late.add(listener);
    queueMicrotask(() => late.emit(reason));
    return disposable;
  }
}
