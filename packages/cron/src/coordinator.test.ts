import type { Leasehold } from '@leasehold/core';
import { describe, expect, it } from 'vitest';
import { leaseholdRunCoordinator, parseCoordinatorKey, type TaskContext } from './coordinator.js';
import { isInvalidArgumentError } from './errors.js';

const fakeClient = {
  sharedSession: () => Promise.reject(new Error('unused')),
} as unknown as Leasehold;

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

describe('parseCoordinatorKey', () => {
  it("splits node-cron's '<name>:<slot ISO>' key, also for names with colons", () => {
    expect(parseCoordinatorKey('report:2025-01-01T00:00:00.000Z')).toEqual({
      name: 'report',
      fireMs: Date.parse('2025-01-01T00:00:00.000Z'),
    });
    expect(parseCoordinatorKey('billing:eu:2025-01-01T10:30:00.000Z').name).toBe('billing:eu');
  });

  it('rejects anything else', () => {
    rejects(() => parseCoordinatorKey('report'), 'key must be', '"report"');
    rejects(() => parseCoordinatorKey(':2025-01-01T00:00:00.000Z'), 'key must be');
    rejects(() => parseCoordinatorKey('r:2025-13-01T00:00:00.000Z'), 'key must be');
    rejects(() => parseCoordinatorKey(undefined), 'key must be');
  });
});

describe('leaseholdRunCoordinator', () => {
  it('has the shape node-cron 4 calls', () => {
    const c = leaseholdRunCoordinator(fakeClient);
    expect(typeof c.shouldRun).toBe('function');
    expect(typeof c.onComplete).toBe('function');
    expect(c.claimOf('report', new Date())).toBeUndefined();
  });

  it('rejects bad options and a bad client', () => {
    rejects(() => leaseholdRunCoordinator({} as Leasehold), 'client must be');
    rejects(
      () => leaseholdRunCoordinator(fakeClient, { overlap: 'never' as 'skip' }),
      'options.overlap',
    );
    rejects(() => leaseholdRunCoordinator(fakeClient, { retentionSeconds: 1 }), 'retentionSeconds');
    rejects(() => leaseholdRunCoordinator(fakeClient, { prefix: '' }), 'prefix');
    rejects(
      () => leaseholdRunCoordinator(fakeClient, { ttl: 5 } as never),
      'options.ttl must be left out (not an option',
    );
  });

  it('refuses a non-object where options belong, a skew not under retention, and a bad task to track', async () => {
    rejects(
      () => leaseholdRunCoordinator(fakeClient, 'prefix' as never),
      'options must be an object',
    );
    rejects(
      () => leaseholdRunCoordinator(fakeClient, { maxClockSkewMs: 60_000, retentionSeconds: 60 }),
      'options.maxClockSkewMs must be less than retentionSeconds (60 s = 60000 ms)',
    );
    rejects(
      () => leaseholdRunCoordinator(fakeClient, { overlap: 'replace' as 'skip' }),
      'options.overlap',
    );
    const c = leaseholdRunCoordinator(fakeClient);
    await expect(c.history('t', 'limit' as never)).rejects.toSatisfy(isInvalidArgumentError);
    await expect(c.history('t', { limt: 1 } as never)).rejects.toThrow(
      'options.limt must be left out (not an option',
    );
    rejects(() => c.track('task' as never), 'task must be a node-cron ScheduledTask');
    rejects(() => c.track({ on() {}, off() {} }), 'task.name must be');
    rejects(() => c.claimOf('', new Date()), 'name must be');
  });

  it('a tracked task tells its listeners apart and stops listening when disposed', () => {
    const listeners = new Map<string, (ctx: TaskContext) => void>();
    const task = {
      name: 't',
      on: (event: string, fn: (ctx: TaskContext) => void) => listeners.set(event, fn),
      off: (event: string) => listeners.delete(event),
    };
    const c = leaseholdRunCoordinator(fakeClient);
    const tracking = c.track(task);
    expect([...listeners.keys()].sort()).toEqual(['execution:failed', 'execution:finished']);
    // An event for a fire this instance does not hold is ignored.
    listeners.get('execution:failed')!({ date: new Date(), execution: { error: new Error('x') } });
    tracking[Symbol.dispose]();
    expect(listeners.size).toBe(0);
  });

  it('rejects a bad key or ttl from shouldRun before any I/O', async () => {
    const c = leaseholdRunCoordinator(fakeClient);
    await expect(c.shouldRun('nope', 1000)).rejects.toSatisfy(isInvalidArgumentError);
    await expect(c.shouldRun('r:2025-01-01T00:00:00.000Z', 0)).rejects.toSatisfy(
      isInvalidArgumentError,
    );
  });
});
