import { describe, expect, it } from 'vitest';
import { LocalQueue } from './local-queue.js';

describe('LocalQueue', () => {
  it('lets holders of one name in one at a time, in arrival order', async () => {
    const queue = new LocalQueue();
    const never = new AbortController().signal;
    const order: string[] = [];
    const exitA = await queue.enter('n', never);
    const b = queue.enter('n', never).then((exit) => (order.push('b'), exit));
    const c = queue.enter('n', never).then((exit) => (order.push('c'), exit));
    expect(queue.busy('n')).toBe(true);
    exitA();
    (await b)();
    (await c)();
    expect(order).toEqual(['b', 'c']);
    await Promise.resolve();
    await Promise.resolve();
    expect(queue.busy('n')).toBe(false);
  });

  it('keeps other names independent', async () => {
    const queue = new LocalQueue();
    const never = new AbortController().signal;
    await queue.enter('a', never);
    const exitB = await queue.enter('b', never);
    exitB();
  });

  it('an aborted entrant rejects with the reason and does not block the next', async () => {
    const queue = new LocalQueue();
    const never = new AbortController().signal;
    const exitA = await queue.enter('n', never);
    const controller = new AbortController();
    const aborted = queue.enter('n', controller.signal);
    const next = queue.enter('n', never);
    const reason = new Error('gave up');
    controller.abort(reason);
    await expect(aborted).rejects.toBe(reason);
    exitA();
    const exitNext = await next;
    exitNext();
  });
});
