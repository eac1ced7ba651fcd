/** Wall-clock milliseconds comparable across processes on one host (sub-millisecond). */
export const now = () => performance.timeOrigin + performance.now();

/** Nearest-rank percentile of unsorted samples; NaN when there are none. */
export function percentile(samples, p) {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? sorted[0];
}

/** n, p50, p90, p99 and ops/s (from the mean) of latency samples in milliseconds. */
export function summarize(samples) {
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return {
    n: samples.length,
    p50: percentile(samples, 0.5),
    p90: percentile(samples, 0.9),
    p99: percentile(samples, 0.99),
    opsPerSec: samples.length ? 1000 / mean : NaN,
  };
}

export const round = (x, digits = 2) =>
  Number.isFinite(x) ? Math.round(x * 10 ** digits) / 10 ** digits : null;

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs each named op `perRound` times per round, the ops one after the other in an order that
 * rotates every round, so drift on a shared machine falls on every op alike. Returns the
 * latency samples (ms) of each op; an op may return its own duration instead of being timed.
 */
export async function interleave(ops, { rounds, perRound, warmup }) {
  const names = Object.keys(ops);
  let i = 0;
  for (const name of names) for (let w = 0; w < warmup; w++) await ops[name](i++);
  const samples = Object.fromEntries(names.map((name) => [name, []]));
  const perRoundSamples = Object.fromEntries(names.map((name) => [name, []]));
  for (let r = 0; r < rounds; r++) {
    const order = names.map((_, k) => names[(k + r) % names.length]);
    for (const name of order) {
      const slice = [];
      for (let k = 0; k < perRound; k++) {
        const start = now();
        const measured = await ops[name](i++);
        slice.push(typeof measured === 'number' ? measured : now() - start);
      }
      samples[name].push(...slice);
      perRoundSamples[name].push(slice);
    }
  }
  return { samples, perRound: perRoundSamples };
}

/** Resolves when `check()` is truthy, polling every `everyMs`; rejects after `timeoutMs`. */
export async function until(check, { timeoutMs = 10_000, everyMs = 1, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) {
      const described = typeof what === 'function' ? what() : what;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${described}`);
    }
    await (everyMs > 0 ? sleep(everyMs) : new Promise((resolve) => setImmediate(resolve)));
  }
}
