import { setMaxListeners } from 'node:events';
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
    if (this.#set.size === 0) return;
    for (const listener of this.#set.size === 1 ? this.#set : [...this.#set]) {
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
 * called once when it trips (at once, in a microtask, if it already has). `check` runs before
 * every read of the signal (see {@link checkOnRead}).
 *
 * The AbortController and the listener set are made on first use: a held lock nobody asks for a
 * signal costs neither (at 100,000 holds on one session that is most of their memory). Internal
 * waits add a listener each, so many at once are expected: no MaxListeners warning.
 */
export class LossLatch<E extends Error> {
  #controller: AbortController | undefined;
  #listeners: Listeners<E> | undefined;
  #reason: E | undefined;
  /** A reason not made yet (see `trip`): made when something reads it. */
  #make: (() => E) | undefined;

  constructor(private readonly check?: () => void) {}

  get signal(): AbortSignal {
    if (this.#controller) return this.#controller.signal;
    const controller = (this.#controller = new AbortController());
    const signal = controller.signal;
    setMaxListeners(0, signal);
    if (this.check) checkOnRead(signal, this.check);
    const reason = this.reason;
    if (reason) controller.abort(reason);
    return signal;
  }

  /** The reason it tripped with, without running `check`. */
  get reason(): E | undefined {
    if (this.#make) {
      this.#reason = this.#make();
      this.#make = undefined;
    }
    return this.#reason;
  }

  /** Whether it has tripped, without making a reason not made yet. */
  get tripped(): boolean {
    return this.#reason !== undefined || this.#make !== undefined;
  }

  /**
   * Trips the latch; later calls are ignored. Returns whether this call tripped it. A function
   * is called for the reason only when something needs it (a signal made, a listener, a read):
   * a release nobody watches makes no error.
   */
  trip(reason: E | (() => E)): boolean {
    if (this.tripped) return false;
    if (typeof reason === 'function') this.#make = reason;
    else this.#reason = reason;
    if (!this.#controller && !this.#listeners) return true;
    const made = this.reason!;
    this.#controller?.abort(made);
    const listeners = this.#listeners;
    this.#listeners = undefined;
    listeners?.emit(made);
    return true;
  }

  on(listener: (reason: E) => void): Disposable {
    const reason = this.reason;
    if (reason === undefined) return (this.#listeners ??= new Listeners<E>()).add(listener);
    const late = new Listeners<E>();
    const disposable = late.add(listener);
    queueMicrotask(() => late.emit(reason));
    return disposable;
  }
}

/**
 * Makes an error that is an expected outcome rather than a failure (a release, a resignation, a
 * close: the reason a hold's signal aborts on every release) without capturing a stack trace,
 * which costs more than the rest of a release's local work. Its `stack` is its first line only.
 */
export function withoutStack<E extends Error>(make: () => E): E {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * Makes `check` run before every read of `signal`'s `aborted`, `reason` and `throwIfAborted()`,
 * on the signal object itself: code that kept the signal from before a stalled event loop sees a
 * loss its owner can compute (a passed deadline) on its first read, before any timer fires.
 */
export function checkOnRead(signal: AbortSignal, check: () => void): AbortSignal {
  const getter = (name: 'aborted' | 'reason') =>
    Object.getOwnPropertyDescriptor(AbortSignal.prototype, name)!.get!.bind(signal);
  const [aborted, reason] = [getter('aborted'), getter('reason')];
  Object.defineProperties(signal, {
    aborted: { get: () => (check(), aborted() as boolean) },
    reason: { get: () => (check(), reason() as unknown) },
    throwIfAborted: {
      value: () => {
        check();
        if (aborted()) throw reason();
      },
    },
  });
  return signal;
}
