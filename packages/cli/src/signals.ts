/**
 * leasehold's own signal handling. Handlers are installed once, at the start of a command, and
 * each phase decides what a signal means: while waiting for a lock it ends the wait (the queue
 * key is withdrawn and the lease revoked); while the command runs it is forwarded to it.
 */
import { CliError, signalExitCode } from './exit-codes.js';

/** The signals forwarded to the command and that interrupt a wait. */
export const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
export type ForwardedSignal = (typeof FORWARDED)[number];

/** leasehold was interrupted by `signal` before its work was done: exit 128 + N. */
export class InterruptedError extends CliError {
  constructor(
    readonly signal: ForwardedSignal,
    silent: boolean,
  ) {
    super(`interrupted by ${signal}`, signalExitCode(signal), { silent });
    this.name = 'InterruptedError';
  }
}

export class Signals implements Disposable {
  #handler: (signal: ForwardedSignal) => void;
  readonly #listeners: [NodeJS.Signals, () => void][] = [];
  readonly #interrupt = new AbortController();

  /**
   * `ignoreStop`: Ctrl-Z (SIGTSTP) and background-terminal stops are ignored. A `run` or
   * `elect` that stopped would keep its command running with nobody renewing the lease.
   * `quietStop`: a signal is the normal end (`observe`, `inspect --watch`): exit 128+N without
   * a message.
   */
  constructor(options: { ignoreStop: boolean; quietStop?: boolean }) {
    const quiet = options.quietStop === true;
    this.#handler = (signal) => this.#interrupt.abort(new InterruptedError(signal, quiet));
    for (const signal of FORWARDED) this.#on(signal, () => this.#handler(signal));
    if (options.ignoreStop) {
      for (const signal of ['SIGTSTP', 'SIGTTIN', 'SIGTTOU'] as const) this.#on(signal, () => {});
    }
  }

  #on(signal: NodeJS.Signals, listener: () => void): void {
    process.on(signal, listener);
    this.#listeners.push([signal, listener]);
  }

  /** Aborts (with an {@link InterruptedError}) at the first signal, until {@link forward}. */
  get interrupted(): AbortSignal {
    return this.#interrupt.signal;
  }

  /** From now on, signals go to `handler` instead of interrupting. */
  forward(handler: (signal: ForwardedSignal) => void): void {
    this.#handler = handler;
  }

  [Symbol.dispose](): void {
    for (const [signal, listener] of this.#listeners.splice(0)) process.off(signal, listener);
  }
}
