import {
  connect,
  isInsufficientLeaseTimeError,
  isLeaseLostError,
  isLockLostError,
  type StallEvent,
} from '@leasehold/core';
import { describe, expect, it } from 'vitest';
import { sharedEndpoints, uniquePrefix, waitFor } from '../setup/etcd.js';
import { recordingLogger } from '../setup/logger.js';
import { inMemoryTelemetry } from '../setup/telemetry.js';

const endpoints = sharedEndpoints();

/** Blocks this process's event loop until `performance.now()` reaches `until`. */
function busyUntil(until: number): void {
  while (performance.now() < until) {
    // a synchronous loop: no timer, no keepalive, no I/O runs meanwhile
  }
}

function nextStall(client: { onStall(l: (e: StallEvent) => void): Disposable }) {
  return new Promise<StallEvent>((resolve) => {
    const subscription = client.onStall((event) => {
      subscription[Symbol.dispose]();
      resolve(event);
    });
  });
}

describe('stall detection on a real etcd', () => {
  it('a 1.6 s busy loop while holding a lock: the stall is reported with the time left, which timeLeftMs() already showed', async () => {
    const otel = inMemoryTelemetry();
    const { lines, logger } = recordingLogger();
    await using client = await connect({
      endpoints,
      lockPrefix: uniquePrefix('stall'),
      logger,
      telemetry: otel.telemetry,
    });
    const session = await client.session({ ttlSeconds: 10 });
    const lock = await client.acquire('critical', { session });
    const stalled = nextStall(client);

    // leftBefore is read first: a preemption between the two reads then only makes the bound
    // below looser, never wrong.
    const leftBefore = lock.timeLeftMs();
    const before = performance.now();
    busyUntil(before + 1_600);
    const blockedMs = performance.now() - before;
    // Read before any timer or keepalive answer could run: the truth, from the clock.
    const leftAfter = lock.timeLeftMs();
    expect(leftAfter).toBeLessThanOrEqual(leftBefore - blockedMs + 1);
    expect(leftAfter).toBeGreaterThan(0);
    expect(lock.assertTimeLeft(1_000)).toBeGreaterThan(1_000);
    const short = (() => {
      try {
        lock.assertTimeLeft(leftAfter + 2_000);
      } catch (err) {
        return err;
      }
    })();
    expect(isInsufficientLeaseTimeError(short) && short.cause).toBe(undefined);
    expect(isInsufficientLeaseTimeError(short) && short.neededMs).toBe(leftAfter + 2_000);

    const event = await waitFor(() => stalled, { timeoutMs: 5_000, what: 'the stall event' });
    expect(event.leaseId).toBe(session.leaseId);
    expect(event.stalledMs).toBeGreaterThanOrEqual(1_500); // its check was due ≤ 100 ms in
    expect(event.stalledMs).toBeLessThanOrEqual(blockedMs + 1_000);
    expect(event.lost).toBe(false);
    expect(event.remainingMs).toBeGreaterThan(0);
    expect(event.remainingMs).toBeLessThanOrEqual(leftAfter);
    expect(lock.isHeld).toBe(true);

    expect(await otel.count('leasehold.stalls')).toBe(1);
    const duration = await otel.histogram('leasehold.stall.duration');
    expect(duration.max).toBe(event.stalledMs);
    const line = lines.find((l) => l.message?.startsWith('event loop stalled'));
    expect(line?.level).toBe('warn');
    expect(line?.fields).toMatchObject({
      leaseId: session.leaseId.toString(16),
      stalledMs: event.stalledMs,
      lost: false,
    });
    await lock.release();
    await otel.shutdown();
  });

  it('a busy loop past the lease deadline: timeLeftMs() is 0 and assertTimeLeft() throws with the loss as cause right after; the event says lost', async () => {
    const otel = inMemoryTelemetry();
    await using client = await connect({
      endpoints,
      lockPrefix: uniquePrefix('stall-lost'),
      telemetry: otel.telemetry,
    });
    const session = await client.session({ ttlSeconds: 2 });
    const lock = await client.acquire('critical', { session });
    const stalled = nextStall(client);

    const left = lock.timeLeftMs();
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(2_000);
    busyUntil(performance.now() + left + 100); // past the local deadline, no timer has run

    expect(lock.timeLeftMs()).toBe(0);
    expect(session.timeLeftMs()).toBe(0);
    expect(lock.isHeld).toBe(false);
    let err: unknown;
    try {
      lock.assertTimeLeft(1);
    } catch (e) {
      err = e;
    }
    expect(isInsufficientLeaseTimeError(err)).toBe(true);
    const cause = (err as Error).cause;
    expect(isLockLostError(cause) && cause.reason).toBe('session');
    const sessionLoss = (cause as Error).cause;
    expect(isLeaseLostError(sessionLoss) && sessionLoss.reason).toBe('deadline');

    const event = await waitFor(() => stalled, { timeoutMs: 5_000, what: 'the stall event' });
    expect(event).toMatchObject({ leaseId: session.leaseId, remainingMs: 0, lost: true });
    expect(event.stalledMs).toBeGreaterThanOrEqual(left + 100 - 100);
    expect(await otel.count('leasehold.stalls')).toBe(1);
    expect(await otel.count('leasehold.sessions.lost', { reason: 'deadline' })).toBe(1);
    await otel.shutdown();
  });
});
