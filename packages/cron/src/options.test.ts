import { describe, expect, it } from 'vitest';
import { isInvalidArgumentError } from './errors.js';
import { defaults, encodeJob, jobSettings, schedulerSettings, validateDrainMs } from './options.js';

function rejects(fn: () => unknown, ...parts: string[]) {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(isInvalidArgumentError(caught), String(caught)).toBe(true);
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
      'options.overlaps is not an option',
      'overlap,',
    );
  });

  it('keeps catch-up inside retention, and only with run-once', () => {
    rejects(
      () =>
        jobSettings({ misfire: 'run-once', catchUpWindowMs: 60_000, retentionSeconds: 60 }, true),
      'catchUpWindowMs',
      'less than retentionSeconds',
    );
    rejects(
      () => jobSettings({ catchUpWindowMs: 1000 }, true),
      "only used with misfire: 'run-once'",
    );
    rejects(
      () => jobSettings({ lateToleranceMs: 60_000, retentionSeconds: 60 }, true),
      'lateToleranceMs',
    );
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
    rejects(() => schedulerSettings({ clock: () => new Date() }), 'options.clock is not an option');
    rejects(() => schedulerSettings(7), 'options must be an object');
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
