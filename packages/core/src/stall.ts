/**
 * Stalls of this process's own event loop.
 *
 * A lease is measured on the monotonic clock, which keeps running while the event loop is
 * blocked (a long synchronous loop, a GC pause, SIGSTOP, a suspended VM); keepalives are not
 * sent meanwhile. The monitor is a timer due every `stallCheckIntervalMs`: how late it fires is
 * how long the loop was blocked (at least). It runs only while the client has live sessions and
 * never keeps the process alive.
 */
import { callAt, type Clock } from './clock.js';

/** A stall of the event loop that ate into a live session's lease. */
export interface StallEvent {
  /** How long the event loop was blocked: at least this long (a timer's lateness). */
  stalledMs: number;
  /** The session's lease. */
  leaseId: bigint;
  /** Milliseconds left before the session's local deadline right after the stall; 0 if lost. */
  remainingMs: number;
  /** Whether the session is lost now: the stall ran past its deadline (or it ended meanwhile). */
  lost: boolean;
}

/**
 * Calls `onStall(stalledMs, before)` when its timer fires `thresholdMs` or more late, with what
 * `watched()` returned on the tick before the stall (what was live while the loop was blocked,
 * also if it was lost during the stall). Idles once `watched()` is empty on a tick — not at
 * once: a session lost to a stall ends before the late tick that reports the stall.
 */
export class StallMonitor<T> {
  #stop: (() => void) | undefined;
  #before: T[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly thresholdMs: number,
    private readonly intervalMs: number,
    private readonly watched: () => Iterable<T>,
    private readonly onStall: (stalledMs: number, before: T[]) => void,
  ) {}

  get running(): boolean {
    return this.#stop !== undefined;
  }

  /** Starts watching (idempotent) until a tick finds nothing to watch. */
  start(): void {
    if (this.#stop) return;
    const tick = () => {
      const due = this.clock.now() + this.intervalMs;
      this.#before = [...this.watched()];
      if (this.#before.length === 0) return void (this.#stop = undefined);
      // callAt's timers are the clock's: unref'd, they never keep the process alive.
      this.#stop = callAt(this.clock, due, () => {
        const stalledMs = this.clock.now() - due;
        const before = this.#before;
        tick();
        if (stalledMs >= this.thresholdMs) this.onStall(stalledMs, before);
      });
    };
    tick();
  }

  /** Stops watching now (idempotent); `start()` again resumes. */
  stop(): void {
    this.#stop?.();
    this.#stop = undefined;
    this.#before = [];
  }
}
