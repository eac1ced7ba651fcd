import { raceSignal } from './wait.js';

/**
 * FIFO of in-process holders of one lock name on one session. Two holds on one session would
 * share one etcd key (the key is named after the lease), so the second must wait its turn here
 * and then create the key afresh, which gives it its own create revision and token.
 */
export class LocalQueue {
  readonly #tails = new Map<string, Promise<void>>();

  busy(name: string): boolean {
    return this.#tails.has(name);
  }

  /** Waits for earlier holders of `name`; resolves to the function that lets the next one in. */
  async enter(name: string, signal: AbortSignal): Promise<() => void> {
    const previous = this.#tails.get(name) ?? Promise.resolve();
    let exit!: () => void;
    const mine = new Promise<void>((resolve) => (exit = resolve));
    const tail = previous.then(() => mine);
    this.#tails.set(name, tail);
    void tail.then(() => {
      if (this.#tails.get(name) === tail) this.#tails.delete(name);
    });
    try {
      await raceSignal(previous, signal);
    } catch (err) {
      // Keep the chain intact: this entrant leaves as soon as its turn would have come.
      void previous.then(exit);
      throw err;
    }
    let exited = false;
    return () => {
      if (!exited) {
        exited = true;
        exit();
      }
    };
  }
}
