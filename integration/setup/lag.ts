/**
 * Measures this process's event-loop lag while a test runs, so a timing bound can include what
 * the host actually cost (a loaded CI machine delays every timer and every callback) instead of
 * a constant tuned on a quiet one.
 */
export interface LagMonitor extends Disposable {
  /** The largest delay seen so far between when a tick was due and when it ran, in ms. */
  readonly maxLagMs: number;
}

/** Starts sampling the loop every `intervalMs` (default 10). Dispose to stop. */
export function monitorLoopLag(intervalMs = 10): LagMonitor {
  let due = performance.now() + intervalMs;
  let max = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    max = Math.max(max, now - due);
    due = now + intervalMs;
  }, intervalMs);
  timer.unref();
  return {
    get maxLagMs() {
      // A tick still pending counts too: the loop may be blocked right now.
      return Math.max(max, performance.now() - due);
    },
    [Symbol.dispose]: () => clearInterval(timer),
  };
}
