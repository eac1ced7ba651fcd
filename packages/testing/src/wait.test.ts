import { describe, expect, it } from 'vitest';
import { allSettledOrThrow, delay, withDeadline } from './wait.js';

describe('withDeadline', () => {
  it('passes through a result that arrives in time', async () => {
    await expect(withDeadline(Promise.resolve(7), 1000, 'x')).resolves.toBe(7);
  });

  it('rejects with ETCD_TIMEOUT naming the operation when the deadline passes', async () => {
    const never = new Promise<never>(() => {});
    await expect(withDeadline(never, 20, 'starting etcd')).rejects.toMatchObject({
      code: 'ETCD_TIMEOUT',
      message: 'starting etcd did not finish within 20 ms',
    });
  });

  it('rejects with the abort reason', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    const pending = withDeadline(new Promise(() => {}), 10_000, 'x', controller.signal);
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await expect(delay(10_000, controller.signal)).rejects.toBe(reason);
  });
});

describe('allSettledOrThrow', () => {
  it('waits for every promise before rejecting with the first failure', async () => {
    let slowDone = false;
    const slow = delay(30).then(() => {
      slowDone = true;
    });
    const first = new Error('first');
    await expect(
      allSettledOrThrow([Promise.reject(first), slow, Promise.reject(new Error('second'))]),
    ).rejects.toBe(first);
    expect(slowDone).toBe(true);
    await expect(allSettledOrThrow([Promise.resolve(1), Promise.resolve(2)])).resolves.toEqual([
      1, 2,
    ]);
  });
});
