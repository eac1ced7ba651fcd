/**
 * Flag values as numbers. Strict: `10s`, `1e3`, `0x10` or `12abc` are rejected rather than
 * half-read, and each message names the flag and what it accepts.
 */
import { MAX_PERMITS, MAX_TTL_SECONDS, MAX_VALUE_BYTES, MIN_TTL_SECONDS } from '@leasehold/core';
import { usageError } from './exit-codes.js';

/** Timers in Node fire at once for longer delays; every duration flag stays below it. */
export const MAX_DURATION_MS = 2 ** 31 - 1;

function wholeNumber(text: string): number | undefined {
  return /^\d+$/.test(text.trim()) ? Number(text.trim()) : undefined;
}

/** A positive whole number of milliseconds, at most {@link MAX_DURATION_MS} (about 24.8 days). */
export function parseDurationMs(flag: string, text: string): number {
  const n = wholeNumber(text);
  if (n === undefined || n < 1 || n > MAX_DURATION_MS) {
    throw usageError(
      `${flag} must be a whole number of milliseconds from 1 to ${MAX_DURATION_MS}, got ${JSON.stringify(text)}`,
    );
  }
  return n;
}

const GO_UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * A duration as etcdctl reads its own (Go's `time.ParseDuration`: `2s`, `500ms`, `1m30s`,
 * `1.5s`), for its environment variables. Rounded up to whole milliseconds, from 1 to
 * {@link MAX_DURATION_MS}; a bare number has no unit and is refused, as Go refuses it.
 */
export function parseGoDurationMs(name: string, text: string): number {
  const part = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = part.exec(text); m !== null; m = part.exec(text)) {
    total += Number(m[1]) * GO_UNIT_MS[m[2]!]!;
    matched = part.lastIndex;
  }
  const ms = Math.ceil(total - 1e-9);
  if (text === '' || matched !== text.length || ms < 1 || ms > MAX_DURATION_MS) {
    throw usageError(
      `${name} must be a duration as etcdctl takes it, such as "2s", "500ms" or "1m30s", from 1ms to ${MAX_DURATION_MS}ms, got ${JSON.stringify(text)}`,
    );
  }
  return ms;
}

/** Like {@link parseDurationMs} but 0 is allowed (`--grace 0`: SIGKILL at once). */
export function parseGraceMs(flag: string, text: string): number {
  const n = wholeNumber(text);
  if (n === undefined || n > MAX_DURATION_MS) {
    throw usageError(
      `${flag} must be a whole number of milliseconds from 0 to ${MAX_DURATION_MS}, got ${JSON.stringify(text)}`,
    );
  }
  return n;
}

/** A lease TTL: whole seconds within etcd's limits (core's MIN_TTL_SECONDS..MAX_TTL_SECONDS). */
export function parseTtlSeconds(flag: string, text: string): number {
  const n = wholeNumber(text);
  if (n === undefined || n < MIN_TTL_SECONDS || n > MAX_TTL_SECONDS) {
    throw usageError(
      `${flag} must be a whole number of seconds from ${MIN_TTL_SECONDS} (etcd's minimum) to ${MAX_TTL_SECONDS}, got ${JSON.stringify(text)}`,
    );
  }
  return n;
}

/** A holder or candidate value: at most core's MAX_VALUE_BYTES of UTF-8. */
export function parseValue(flag: string, text: string): string {
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_VALUE_BYTES) {
    throw usageError(`${flag} must be at most ${MAX_VALUE_BYTES} bytes of UTF-8, got ${bytes}`);
  }
  return text;
}

/** A semaphore's permits: a whole number from 1 to core's MAX_PERMITS. */
export function parsePermits(flag: string, text: string): number {
  const n = wholeNumber(text);
  if (n === undefined || n < 1 || n > MAX_PERMITS) {
    throw usageError(
      `${flag} must be a whole number from 1 to ${MAX_PERMITS}, got ${JSON.stringify(text)}`,
    );
  }
  return n;
}
