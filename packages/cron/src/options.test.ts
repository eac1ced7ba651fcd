import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, isCronError, isInvalidArgumentError } from './errors.js';
import {
  defaults,
  encodeJob,
  jobSettings,
  optionsObject,
  schedulerSettings,
  validateDrainMs,
  validateLimit,
} from './options.js';

function rejects(fn: () => unknown, ...parts: string[]) {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(isInvalidArgumentError(caught), String(caught)).toBe(true);
  // cron's own class (the brand alone is shared with core's), even where core's checks run
  expect(caught).toBeInstanceOf(InvalidArgumentError);
  expect(isCronError(caught)).toBe(true);
  for (const part of parts) expect((caught as Error).message).toContain(part);
}

describe('jobSettings', () => {
  it('applies the documented defaults', () => {
    expect(jobSettings(undefined, true)).toEqual({
      overlap: 'skip',
      misfire: 'skip',
      catchUpWindowMs: 3_600_000,
      lateToleranceMs: 5_000,
      maxRunMs: undefined,
      startJitterMs: 0,
      timeZone: 'UTC',
      retentionSeconds: 86_400,
    });
    expect(defaults.timeZone).toBe('UTC');
  });

  it('keeps valid options', () => {
    const s = jobSettings(
      {
        overlap: 'allow',
        misfire: 'run-once',
        catchUpWindowMs: 60_000,
        lateToleranceMs: 100,
        maxRunMs: 5_000,
        startJitterMs: 250,
        timeZone: 'America/New_York',
        retentionSeconds: 3_600,
      },
      true,
    );
    expect(s).toMatchObject({ overlap: 'allow', misfire: 'run-once', maxRunMs: 5_000 });
  });

  it('rejects every bad option with a message naming the value and what is allowed', () => {
    rejects(
      () => jobSettings({ overlap: 'wait' }, true),
      'options.overlap',
      "'skip', 'allow'",
      '"wait"',
    );
    rejects(() => jobSettings({ misfire: 'all' }, true), 'options.misfire', "'run-once'", '"all"');
    rejects(() => jobSettings({ maxRunMs: 0 }, true), 'options.maxRunMs', '>= 1', 'got 0');
    rejects(() => jobSettings({ maxRunMs: Infinity }, true), 'options.maxRunMs', 'Infinity');
    rejects(() => jobSettings({ maxRunMs: '5s' }, true), 'options.maxRunMs', '"5s"');
    rejects(() => jobSettings({ startJitterMs: -1 }, true), 'options.startJitterMs', '>= 0', '-1');
    rejects(() => jobSettings({ lateToleranceMs: NaN }, true), 'options.lateToleranceMs', 'NaN');
    rejects(() => jobSettings({ lateToleranceMs: 1 }, true), 'options.lateToleranceMs', '1');
    rejects(() => jobSettings({ retentionSeconds: 59 }, true), 'retentionSeconds', 'from 60', '59');
    rejects(() => jobSettings({ retentionSeconds: 90.5 }, true), 'whole number', '90.5');
    rejects(() => jobSettings('fast', true), 'options must be an object', '"fast"');
    rejects(() => jobSettings(null, true), 'options must be an object', 'null');
  });

  it('rejects unknown time zones, and a time zone for { everyMs }', () => {
    rejects(
      () => jobSettings({ timeZone: 'Mars/Olympus' }, true),
      'IANA time zone',
      '"Mars/Olympus"',
    );
    rejects(() => jobSettings({ timeZone: 42 }, true), 'options.timeZone', '42');
    rejects(() => jobSettings({ timeZone: 'UTC' }, false), 'cron expressions only', 'everyMs');
  });

  it('rejects a misspelt option instead of ignoring it', () => {
    rejects(
      () => jobSettings({ overlaps: 'allow' }, true),
      'options.overlaps must be left out (not an option',
      'overlap,',
    );
  });

  it('catch-up only with run-once', () => {
    rejects(
      () => jobSettings({ catchUpWindowMs: 1000 }, true),
      "only used with misfire: 'run-once'",
    );
  });

  it('refuses a retention that does not outlive window + start jitter + clock skew, naming the numbers', () => {
    // Issue 19's case: 60 s of retention, a 59 s catch-up window; replicas 9 s apart ran a fire
    // twice once its record expired. With a stated skew of 10 s it is refused.
    rejects(
      () =>
        jobSettings({ misfire: 'run-once', catchUpWindowMs: 59_000, retentionSeconds: 60 }, true),
      'options.retentionSeconds (60 s = 60000 ms) must be more than options.catchUpWindowMs (59000 ms) + maxClockSkewMs (10000 ms) = 69000 ms',
      'run it twice',
    );
    rejects(
      () => jobSettings({ lateToleranceMs: 59_000, retentionSeconds: 60 }, true),
      'options.lateToleranceMs (59000 ms) + maxClockSkewMs (10000 ms)',
    );
    rejects(
      () =>
        jobSettings(
          { lateToleranceMs: 30_000, startJitterMs: 25_000, retentionSeconds: 60 },
          true,
          5_000,
        ),
      'options.lateToleranceMs (30000 ms) + startJitterMs (25000 ms) + maxClockSkewMs (5000 ms) = 60000 ms',
    );
    // The larger of the two windows counts under run-once.
    rejects(
      () =>
        jobSettings(
          {
            misfire: 'run-once',
            catchUpWindowMs: 1_000,
            lateToleranceMs: 55_000,
            retentionSeconds: 60,
          },
          true,
        ),
      'options.lateToleranceMs (55000 ms)',
    );
    // Just inside the bound is accepted; a scheduler that states a smaller skew may go further.
    expect(
      jobSettings({ misfire: 'run-once', catchUpWindowMs: 49_999, retentionSeconds: 60 }, true)
        .catchUpWindowMs,
    ).toBe(49_999);
    expect(
      jobSettings({ misfire: 'run-once', catchUpWindowMs: 59_000, retentionSeconds: 60 }, true, 999)
        .catchUpWindowMs,
    ).toBe(59_000);
  });
});

describe('options objects', () => {
  it.each([['fast'], [42], [null], [[]], [() => ({})], [true]])(
    'refuses %j where an options object belongs, naming it',
    (value) => {
      rejects(() => optionsObject(value, ['limit']), 'options must be an object { limit? }');
      rejects(() => jobSettings(value, true), 'options must be an object of job options');
      rejects(() => schedulerSettings(value), 'options must be an object of scheduler options');
    },
  );

  it('takes undefined as {}, and refuses a key that is not an option', () => {
    expect(optionsObject(undefined, ['limit'])).toEqual({});
    rejects(
      () => optionsObject({ limt: 5 }, ['limit']),
      'options.limt must be left out (not an option; allowed: limit)',
    );
  });

  it('validates limits', () => {
    expect(validateLimit(undefined, 20, 100)).toBe(20);
    rejects(
      () => validateLimit(0, 20, 100),
      'options.limit must be a whole number from 1 to 100',
      'got 0',
    );
    rejects(() => validateLimit('5', 20, 100), '"5"');
  });
});

describe('schedulerSettings', () => {
  it('defaults', () => {
    const s = schedulerSettings(undefined);
    expect(s.prefix).toBe('/leasehold/cron/');
    expect(s.runner).toMatch(/:\d+$/);
    expect(s.now()).toBeInstanceOf(Date);
  });

  it('rejects bad options', () => {
    rejects(() => schedulerSettings({ prefix: '' }), 'prefix', 'non-empty');
    rejects(() => schedulerSettings({ prefix: 'a\0b' }), 'prefix', 'without NUL');
    rejects(() => schedulerSettings({ runner: '' }), 'options.runner');
    rejects(() => schedulerSettings({ now: Date.now() }), 'options.now', 'Date');
    rejects(
      () => schedulerSettings({ session: { leaseId: 1 } }),
      'options.session',
      'client.session()',
    );
    rejects(
      () => schedulerSettings({ clock: () => new Date() }),
      'options.clock must be left out (not an option',
    );
    rejects(() => schedulerSettings(7), 'options must be an object');
    rejects(() => schedulerSettings({ maxClockSkewMs: -1 }), 'options.maxClockSkewMs', '-1');
    expect(schedulerSettings({ maxClockSkewMs: 0 }).maxClockSkewMs).toBe(0);
    expect(schedulerSettings(undefined).maxClockSkewMs).toBe(10_000);
  });

  it('validates drainMs', () => {
    expect(validateDrainMs(undefined)).toBe(10_000);
    expect(validateDrainMs(0)).toBe(0);
    rejects(() => validateDrainMs(-5), 'drainMs', '-5');
  });
});

describe('encodeJob', () => {
  it('escapes / and % so that one job name is never a prefix of another', () => {
    expect(encodeJob('reports')).toBe('reports');
    expect(encodeJob('reports/daily')).toBe('reports%2Fdaily');
    expect(encodeJob('50%/x')).toBe('50%25%2Fx');
  });

  it('rejects empty, long, NUL and ill-formed names', () => {
    rejects(() => encodeJob(''), 'job must be a non-empty string');
    rejects(() => encodeJob('x'.repeat(257)), 'at most 256');
    rejects(() => encodeJob('a\0b'), 'without NUL');
    rejects(() => encodeJob('bad\uD800'), 'unpaired surrogates');
    rejects(() => encodeJob(5), 'got 5');
  });
});
