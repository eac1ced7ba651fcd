/**
 * Time for an in-memory etcd and the clients on it: it moves only when a test says so. Lease
 * expiry, keepalive ticks, deadlines and retries all wait on it, so a test decides exactly when
 * a lease runs out instead of sleeping until it does.
 */
import { invalid } from './invalid.js';

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
}

/** Turns of the event loop given to promise chains after each timer fires. */
const SETTLE_TURNS = 5;

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class MemoryClock {
  #now: number;
  #seq = 0;
  readonly #timers = new Map<number, Timer>();
  #advancing: Promise<void> = Promise.resolve();

  constructor(startMs = 0) {
    this.#now = startMs;
  }

  /** Milliseconds since the clock's origin. */
  now(): number {
    return this.#now;
  }

  /** Runs `fn` once the clock reaches `at`. Returns the id for {@link cancel}. */
  schedule(at: number, fn: () => void): number {
    const seq = ++this.#seq;
    this.#timers.set(seq, { at: Math.max(at, this.#now), seq, fn });
    return seq;
  }

  cancel(id: unknown): void {
    this.#timers.delete(id as number);
  }

  /** Timers not yet due. */
  get pending(): number {
    return this.#timers.size;
  }

  /**
   * Moves time forward by `ms`, firing due timers in order and letting the work each one starts
   * (answers, watch events, the next timers) run before the next fires: a session keeps its
   * lease across a long advance, as it would in real time. Calls made meanwhile queue behind.
   */
  advance(ms: number): Promise<void> {
    if (!(Number.isFinite(ms) && ms >= 0)) {
      throw invalid('ms', 'a finite number of milliseconds, 0 or more', ms);
    }
    const run = this.#advancing.then(() => this.#advance(ms));
    this.#advancing = run.catch(() => {});
    return run;
  }

  /** Lets pending work run without moving time. */
  async settle(): Promise<void> {
    for (let i = 0; i < SETTLE_TURNS; i++) await turn();
  }

  async #advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      await this.settle();
      let next: Timer | undefined;
      for (const timer of this.#timers.values()) {
        if (timer.at > target) continue;
        if (!next || timer.at < next.at || (timer.at === next.at && timer.seq < next.seq)) {
          next = timer;
        }
      }
      if (!next) break;
      this.#timers.delete(next.seq);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
    }
    this.#now = target;
    await this.settle();
  }
}
