import {
  InvalidArgumentError as CoreInvalidArgumentError,
  isInvalidArgumentError as isCoreInvalidArgumentError,
} from '@leasehold/core';
import { describe, expect, it } from 'vitest';
import {
  InvalidArgumentError,
  MaxRunTimeError,
  SchedulerStoppedError,
  isCronError,
  isInvalidArgumentError,
  isMaxRunTimeError,
  isSchedulerStoppedError,
} from './errors.js';
import { validateLimit } from './options.js';

describe('errors', () => {
  it('carry name, code and cause', () => {
    const cause = new Error('croner said no');
    const err = new InvalidArgumentError('schedule must be ...', { cause });
    expect(err.name).toBe('InvalidArgumentError');
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.cause).toBe(cause);
    const timeout = new MaxRunTimeError('report', new Date(0), 5000);
    expect(timeout.message).toContain('"report"');
    expect(timeout.message).toContain('1970-01-01T00:00:00.000Z');
    expect(timeout.message).toContain('maxRunMs (5000 ms)');
    expect(new SchedulerStoppedError().code).toBe('SCHEDULER_STOPPED');
  });

  it('each guard answers for its own class only, and the guards survive duplicate copies', () => {
    const all = [
      [new InvalidArgumentError('x'), isInvalidArgumentError],
      [new SchedulerStoppedError(), isSchedulerStoppedError],
      [new MaxRunTimeError('j', new Date(0), 1), isMaxRunTimeError],
    ] as const;
    for (const [err, guard] of all) {
      expect(isCronError(err)).toBe(true);
      for (const [, other] of all) expect(other(err)).toBe(other === guard);
    }
    // A copy from another install: same brand, different class.
    const foreign = Object.defineProperty(new Error('x'), Symbol.for('leasehold.cron.error'), {
      value: 'MAX_RUN_TIME',
    });
    expect(isMaxRunTimeError(foreign)).toBe(true);
    // core's and fence's errors carry their own brands.
    const core = Object.defineProperty(new Error('x'), Symbol.for('leasehold.core.error'), {
      value: 'INVALID_ARGUMENT',
    });
    expect(isInvalidArgumentError(core)).toBe(false);
    expect(isCronError(null)).toBe(false);
    expect(isCronError('INVALID_ARGUMENT')).toBe(false);
  });

  it("one guard for bad input: core's isInvalidArgumentError answers for cron's, and cron's for core's", () => {
    let thrown: unknown;
    try {
      validateLimit('ten', 20, 100);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(InvalidArgumentError);
    for (const err of [
      thrown,
      new InvalidArgumentError('bad job'),
      new CoreInvalidArgumentError('x'),
    ]) {
      expect(isCoreInvalidArgumentError(err), String(err)).toBe(true);
      expect(isInvalidArgumentError(err), String(err)).toBe(true);
    }
    expect(isCoreInvalidArgumentError(new SchedulerStoppedError())).toBe(false);
  });
});
