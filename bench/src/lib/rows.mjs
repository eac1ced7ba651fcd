import { round, summarize } from './stats.mjs';

/** A table row from latency samples (ms), rounded for the table and the JSON file. */
export function latencyRow(scenario, name, samples, extra = {}) {
  const s = summarize(samples);
  return {
    scenario,
    name,
    n: s.n,
    p50: round(s.p50, 3),
    p90: round(s.p90, 3),
    p99: round(s.p99, 3),
    opsPerSec: round(s.opsPerSec, 1),
    ...extra,
  };
}

/** Marks `row` as measured against a baseline: ratio, target text and whether it is met. */
export function judged(row, ratio, target, limit, { atLeast = false } = {}) {
  const r = round(ratio, 3);
  const met = r === null || limit === undefined ? null : atLeast ? r >= limit : r <= limit;
  return { ...row, ratio: r, target, met };
}
