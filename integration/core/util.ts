/**
 * Polls `probe` until it yields a value other than `undefined`/`false`, and returns it; throws
 * at the deadline saying what never happened. Tests wait on events with this, never on sleeps.
 */
export async function waitFor<T>(
  probe: () => T | Promise<T>,
  options: { timeoutMs: number; intervalMs?: number; what: string },
): Promise<Exclude<T, false | undefined>> {
  const deadline = performance.now() + options.timeoutMs;
  for (;;) {
    const remaining = deadline - performance.now();
    const value = await Promise.race([
      Promise.resolve(probe()),
      new Promise<undefined>((resolve) =>
        setTimeout(() => resolve(undefined), Math.max(0, remaining)).unref(),
      ),
    ]);
    if (value !== undefined && value !== false) return value as Exclude<T, false | undefined>;
    if (performance.now() >= deadline) {
      throw new Error(`${options.what} did not happen within ${options.timeoutMs} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
}
