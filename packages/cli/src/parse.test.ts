import { describe, expect, it } from 'vitest';
import { CliError, exitCodes } from './exit-codes.js';
import {
  MAX_DURATION_MS,
  parseDurationMs,
  parseGoDurationMs,
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

describe("etcdctl's durations (Go's time.ParseDuration)", () => {
  it.each([
    ['2s', 2_000],
    ['500ms', 500],
    ['1m30s', 90_000],
    ['1.5s', 1_500],
    ['.5s', 500],
    ['1h', 3_600_000],
    ['250us', 1],
    ['1500µs', 2],
    ['1000000ns', 1],
  ])('reads %j as %d ms (rounded up)', (text, ms) => {
    expect(parseGoDurationMs('ETCDCTL_DIAL_TIMEOUT', text)).toBe(ms);
  });

  it.each(['', '300', '0', '0s', '2 s', 's', '2x', '-1s', '1.5', '2s ', '1e3ms', '25d', '600h'])(
    'refuses %j, naming the variable and the format',
    (text) => {
      usage(
        () => parseGoDurationMs('ETCDCTL_DIAL_TIMEOUT', text),
        /^ETCDCTL_DIAL_TIMEOUT must be a duration as etcdctl takes it, such as "2s", "500ms" or "1m30s", from 1ms to 2147483647ms, got /,
      );
      expect(() => parseGoDurationMs('ETCDCTL_DIAL_TIMEOUT', text)).toThrow(
        `got ${JSON.stringify(text)}`,
      );
    },
  );
});
