import { describe, expect, it } from 'vitest';
import { MemoryClock } from './clock.js';
import { MemoryProcess } from './process.js';

describe('MemoryClock', () => {
  it('fires due timers in time order, letting the work each starts run before the next', async () => {
    const clock = new MemoryClock(100);
    const fired: string[] = [];
    clock.schedule(300, () => fired.push('b@300'));
    clock.schedule(200, () => {
      fired.push('a@200');
      // Work started by a timer (an answer, then a timer of its own) runs before later timers.
      void Promise.resolve().then(() =>
        clock.schedule(clock.now() + 50, () => fired.push('c@250')),
      );
    });
    await clock.advance(1_000);
    expect(fired).toEqual(['a@200', 'c@250', 'b@300']);
    expect(clock.now()).toBe(1_100);
  });

  it('does not fire a cancelled timer or one not yet due', async () => {
    const clock = new MemoryClock();
    const fired: number[] = [];
    const id = clock.schedule(10, () => fired.push(10));
    clock.schedule(30, () => fired.push(30));
    clock.cancel(id);
    await clock.advance(20);
    expect(fired).toEqual([]);
    expect(clock.pending).toBe(1);
  });

  it('refuses a negative or non-finite advance, naming the value', () => {
    const clock = new MemoryClock();
    expect(() => clock.advance(-1)).toThrow(
      /ms must be a finite number of milliseconds, 0 or more, got -1/,
    );
    expect(() => clock.advance(Number.NaN)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });

  it("a paused process's timers wait for resume and then fire late, in order", async () => {
    const clock = new MemoryClock();
    const process = new MemoryProcess(clock);
    const fired: [string, number][] = [];
    process.clock.setTimeout(() => fired.push(['a', clock.now()]), 10);
    process.clock.setTimeout(() => fired.push(['b', clock.now()]), 20);
    process.pause();
    await clock.advance(100);
    expect(fired).toEqual([]);
    process.resume();
    expect(fired).toEqual([
      ['a', 100],
      ['b', 100],
    ]);
  });
});
