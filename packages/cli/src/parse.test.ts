import { describe, expect, it } from 'vitest';
import { CliError, exitCodes } from './exit-codes.js';
import {
  MAX_DURATION_MS,
  parseDurationMs,
  parseGraceMs,
  parseTtlSeconds,
  parseValue,
} from './parse.js';

function usage(fn: () => unknown, pattern: RegExp): void {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(CliError);
  expect((thrown as CliError).exitCode).toBe(exitCodes.usage);
  expect((thrown as Error).message).toMatch(pattern);
}

describe('durations', () => {
  it.each(['0', '-1', '1.5', '10s', '1e3', '0x10', '', ' ', String(MAX_DURATION_MS + 1)])(
    'rejects %j as --wait-timeout',
    (text) =>
      usage(
        () => parseDurationMs('--wait-timeout', text),
        /^--wait-timeout must be a whole number of milliseconds from 1 to 2147483647, got/,
      ),
  );
  it('accepts whole milliseconds', () => {
    expect(parseDurationMs('--wait-timeout', '1')).toBe(1);
    expect(parseDurationMs('--wait-timeout', ` ${MAX_DURATION_MS} `)).toBe(MAX_DURATION_MS);
  });
  it('allows a grace of 0 (SIGKILL at once)', () => {
    expect(parseGraceMs('--grace', '0')).toBe(0);
    usage(
      () => parseGraceMs('--grace', '-5'),
      /--grace must be a whole number of milliseconds from 0/,
    );
  });
});

describe('--ttl', () => {
  it.each(['0', '1', '2.5', 'ten', '9000000001'])('rejects %j', (text) =>
    usage(
      () => parseTtlSeconds('--ttl', text),
      /^--ttl must be a whole number of seconds from 2 \(etcd's minimum\) to 9000000000, got/,
    ),
  );
  it('accepts etcd limits', () => {
    expect(parseTtlSeconds('--ttl', '2')).toBe(2);
    expect(parseTtlSeconds('--ttl', '9000000000')).toBe(9_000_000_000);
  });
});

describe('--value', () => {
  it('takes up to 64 KiB of UTF-8', () => {
    expect(parseValue('--value', 'é'.repeat(32 * 1024))).toHaveLength(32 * 1024);
    usage(
      () => parseValue('--value', 'é'.repeat(32 * 1024 + 1)),
      /at most 65536 bytes of UTF-8, got 65538/,
    );
  });
});
