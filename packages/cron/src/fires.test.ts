import { describe, expect, it } from 'vitest';
import { isInvalidArgumentError } from './errors.js';
import { fireId, parseSchedule, planWake, type Fires, type WakeInput } from './fires.js';

const at = (iso: string) => Date.parse(iso);
const NOW = at('2025-03-10T12:00:00.000Z');

function rejects(fn: () => unknown, ...parts: string[]) {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(isInvalidArgumentError(caught)).toBe(true);
  for (const part of parts) expect((caught as Error).message).toContain(part);
}

describe('parseSchedule', () => {
  it('computes cron fires from the expression, not from when it is asked', () => {
    const fires = parseSchedule('*/15 * * * *', 'UTC', NOW);
    // Asked at any moment within a slot, two replicas name the same next fire.
    expect(fires.next(at('2025-03-10T12:00:00.000Z'))).toBe(at('2025-03-10T12:15:00.000Z'));
    expect(fires.next(at('2025-03-10T12:07:31.250Z'))).toBe(at('2025-03-10T12:15:00.000Z'));
    expect(fires.next(at('2025-03-10T12:14:59.999Z'))).toBe(at('2025-03-10T12:15:00.000Z'));
  });

  it('previous(t) includes a fire exactly at t and nothing after it, latest first', () => {
    const fires = parseSchedule('* * * * * *', 'UTC', NOW);
    expect(fires.previous(at('2025-03-10T12:00:05.000Z'), 2)).toEqual([
      at('2025-03-10T12:00:05.000Z'),
      at('2025-03-10T12:00:04.000Z'),
    ]);
    expect(fires.previous(at('2025-03-10T12:00:05.999Z'), 1)).toEqual([
      at('2025-03-10T12:00:05.000Z'),
    ]);
    const five = parseSchedule('*/5 * * * * *', 'UTC', NOW);
    expect(five.previous(at('2025-03-10T12:00:05.000Z'), 1)).toEqual([
      at('2025-03-10T12:00:05.000Z'),
    ]);
    expect(five.previous(at('2025-03-10T12:00:04.999Z'), 1)).toEqual([
      at('2025-03-10T12:00:00.000Z'),
    ]);
  });

  it('reads expressions in the given time zone, and in UTC otherwise', () => {
    const berlin = parseSchedule('30 9 * * *', 'Europe/Berlin', NOW);
    expect(berlin.next(NOW)).toBe(at('2025-03-11T08:30:00.000Z')); // CET, UTC+1
    // Across the spring DST change (30 March 2025), 09:30 Berlin is 07:30 UTC.
    expect(berlin.next(at('2025-03-30T00:00:00.000Z'))).toBe(at('2025-03-30T07:30:00.000Z'));
    const utc = parseSchedule('30 9 * * *', 'UTC', NOW);
    expect(utc.next(NOW)).toBe(at('2025-03-11T09:30:00.000Z'));
    expect(berlin.description).toBe('cron "30 9 * * *" in Europe/Berlin');
  });

  it('aligns { everyMs } fires to the Unix epoch, so replicas started at different times agree', () => {
    const fires = parseSchedule({ everyMs: 60_000 }, 'UTC', NOW);
    expect(fires.next(at('2025-03-10T12:00:00.000Z'))).toBe(at('2025-03-10T12:01:00.000Z'));
    expect(fires.next(at('2025-03-10T12:00:42.123Z'))).toBe(at('2025-03-10T12:01:00.000Z'));
    expect(fires.previous(at('2025-03-10T12:00:42.123Z'), 2)).toEqual([
      at('2025-03-10T12:00:00.000Z'),
      at('2025-03-10T11:59:00.000Z'),
    ]);
    expect(fires.description).toBe('every 60000 ms');
  });

  it('rejects invalid expressions and intervals with InvalidArgumentError naming them', () => {
    rejects(() => parseSchedule('every minute', 'UTC', NOW), '"every minute"', '5 fields');
    rejects(() => parseSchedule('61 * * * *', 'UTC', NOW), '"61 * * * *"', 'minute');
    rejects(() => parseSchedule('* * * *', 'UTC', NOW), 'not a valid cron expression');
    rejects(() => parseSchedule('', 'UTC', NOW), 'not a valid cron expression');
    rejects(() => parseSchedule({ everyMs: 999 }, 'UTC', NOW), '999', 'from 1000');
    rejects(() => parseSchedule({ everyMs: 1500.5 }, 'UTC', NOW), '1500.5');
    rejects(() => parseSchedule({ everyMs: '1000' }, 'UTC', NOW), '"1000"');
    rejects(() => parseSchedule({ everyMs: 1000, x: 1 }, 'UTC', NOW), 'everyMs');
    rejects(() => parseSchedule(42, 'UTC', NOW), 'cron expression string', '42');
    rejects(() => parseSchedule(null, 'UTC', NOW), 'null');
  });

  it('rejects a schedule that never fires again', () => {
    rejects(() => parseSchedule('0 0 30 2 *', 'UTC', NOW), 'never fires');
    rejects(() => parseSchedule('0 0 0 1 1 * 2020', 'UTC', NOW), 'never fires');
  });

  it('names a fire by its ISO 8601 UTC instant, which sorts by time', () => {
    expect(fireId(at('2025-03-10T12:00:05.000Z'))).toBe('2025-03-10T12:00:05.000Z');
    const ids = [at('2025-03-10T12:00:05.000Z'), at('2025-12-01T00:00:00.000Z')].map(fireId);
    expect([...ids].sort()).toEqual(ids);
  });
});

describe('planWake', () => {
  const everySecond = parseSchedule('* * * * * *', 'UTC', NOW);
  const input = (over: Partial<WakeInput>): WakeInput => ({
    nowMs: NOW,
    afterMs: NOW - 1000,
    lateToleranceMs: 1000,
    misfire: 'skip',
    catchUpWindowMs: 3_600_000,
    ...over,
  });
  const scheduled = (...fires: number[]) =>
    fires.map((fireMs) => ({ fireMs, attempt: 'scheduled' }));

  it('claims a fire reached on time', () => {
    const plan = planWake(everySecond, input({ nowMs: NOW + 20 }));
    expect(plan).toEqual({ claims: scheduled(NOW), missed: [], handledMs: NOW });
  });

  it('claims nothing when woken before the fire, and keeps its place', () => {
    const fires = parseSchedule('*/10 * * * * *', 'UTC', NOW);
    const plan = planWake(fires, input({ nowMs: NOW - 3, afterMs: NOW - 10_000 }));
    expect(plan).toEqual({ claims: [], missed: [], handledMs: NOW - 10_000 });
  });

  it('never claims a fire twice when the clock goes back', () => {
    const plan = planWake(everySecond, input({ nowMs: NOW - 2500, afterMs: NOW }));
    expect(plan).toEqual({ claims: [], missed: [], handledMs: NOW });
  });

  it("misses fires reached too late under misfire: 'skip', and claims those within tolerance, oldest first", () => {
    // A stall of 3.2 s with a 1.5 s tolerance: -3 and -2 s were reached late; -1 and 0 in time.
    const plan = planWake(
      everySecond,
      input({ nowMs: NOW + 200, afterMs: NOW - 4000, lateToleranceMs: 1500 }),
    );
    expect(plan.claims).toEqual(scheduled(NOW - 1000, NOW));
    expect(plan.missed).toEqual([NOW - 2000, NOW - 3000]);
    expect(plan.handledMs).toBe(NOW);
  });

  it('claims a fire reached late within tolerance even after the next fire has come', () => {
    // Woken 1.2 s late on a 1 s schedule (a loaded machine): both fires are still claimed.
    const plan = planWake(
      everySecond,
      input({ nowMs: NOW + 1200, afterMs: NOW - 1000, lateToleranceMs: 5000 }),
    );
    expect(plan.claims).toEqual(scheduled(NOW, NOW + 1000));
    expect(plan.missed).toEqual([]);
  });

  it('counts a fire as late past lateToleranceMs', () => {
    const minutely = parseSchedule('* * * * *', 'UTC', NOW);
    const late = planWake(minutely, input({ nowMs: NOW + 1001, afterMs: NOW - 60_000 }));
    expect(late.claims).toEqual([]);
    expect(late.missed).toEqual([NOW]);
    const tolerant = planWake(
      minutely,
      input({ nowMs: NOW + 5000, afterMs: NOW - 60_000, lateToleranceMs: 10_000 }),
    );
    expect(tolerant.claims).toEqual(scheduled(NOW));
  });

  it("catches up the latest missed fire once under misfire: 'run-once'", () => {
    const hourly = parseSchedule('0 * * * *', 'UTC', NOW);
    const plan = planWake(
      hourly,
      input({ nowMs: NOW + 20 * 60_000, afterMs: NOW - 3 * 3_600_000, misfire: 'run-once' }),
    );
    expect(plan.claims).toEqual([{ fireMs: NOW, attempt: 'catch-up' }]);
    expect(plan.missed).toEqual([NOW - 3_600_000, NOW - 2 * 3_600_000]);
  });

  it('does not catch up a fire older than catchUpWindowMs', () => {
    const hourly = parseSchedule('0 * * * *', 'UTC', NOW);
    const plan = planWake(
      hourly,
      input({
        nowMs: NOW + 20 * 60_000,
        afterMs: NOW - 3_600_000,
        misfire: 'run-once',
        catchUpWindowMs: 10 * 60_000,
      }),
    );
    expect(plan.claims).toEqual([]);
    expect(plan.missed).toEqual([NOW]);
  });

  it('at start-up claims only the latest fire within tolerance', () => {
    const plan = planWake(
      everySecond,
      input({ nowMs: NOW + 200, afterMs: undefined, lateToleranceMs: 5000 }),
    );
    expect(plan).toEqual({ claims: scheduled(NOW), missed: [], handledMs: NOW });
  });

  it("at start-up claims only a fire within tolerance under 'skip', and reports no misses", () => {
    const hourly = parseSchedule('0 * * * *', 'UTC', NOW);
    expect(planWake(hourly, input({ nowMs: NOW + 300, afterMs: undefined }))).toEqual({
      claims: scheduled(NOW),
      missed: [],
      handledMs: NOW,
    });
    expect(planWake(hourly, input({ nowMs: NOW + 5 * 60_000, afterMs: undefined }))).toEqual({
      claims: [],
      missed: [],
      handledMs: undefined,
    });
  });

  it("at start-up under 'run-once' claims the latest fire within the window as a catch-up", () => {
    const hourly = parseSchedule('0 * * * *', 'UTC', NOW);
    const plan = planWake(
      hourly,
      input({ nowMs: NOW + 5 * 60_000, afterMs: undefined, misfire: 'run-once' }),
    );
    expect(plan).toEqual({
      claims: [{ fireMs: NOW, attempt: 'catch-up' }],
      missed: [],
      handledMs: NOW,
    });
    const outside = planWake(
      hourly,
      input({
        nowMs: NOW + 50 * 60_000,
        afterMs: undefined,
        misfire: 'run-once',
        catchUpWindowMs: 30 * 60_000,
      }),
    );
    expect(outside.claims).toEqual([]);
  });

  it('lists at most 100 missed fires after a long stall', () => {
    const plan = planWake(everySecond, input({ nowMs: NOW + 3_600_000 + 10, afterMs: NOW }));
    expect(plan.claims).toEqual(scheduled(NOW + 3_600_000));
    expect(plan.missed).toHaveLength(100);
    expect(plan.missed[0]).toBe(NOW + 3_600_000 - 1000);
    expect(plan.handledMs).toBe(NOW + 3_600_000);
  });

  it('works with any Fires, e.g. a fake with irregular gaps', () => {
    const times = [0, 1000, 5000, 5500];
    const fake: Fires = {
      description: 'fake',
      next: (after) => times.find((t) => t > after),
      previous: (atMs, n) =>
        times
          .filter((t) => t <= atMs)
          .reverse()
          .slice(0, n),
    };
    const plan = planWake(fake, input({ nowMs: 5600, afterMs: 1000, lateToleranceMs: 500 }));
    expect(plan.claims).toEqual(scheduled(5500));
    expect(plan.missed).toEqual([5000]);
  });
});
