import { describe, expect, it, vi } from 'vitest';
import { LossLatch } from './latch.js';
import { isInvalidArgumentError } from './errors.js';

describe('LossLatch', () => {
  it('trips exactly once and keeps the first reason', () => {
    const latch = new LossLatch<Error>();
    const seen: string[] = [];
    latch.on((e) => seen.push(e.message));
    expect(latch.trip(new Error('first'))).toBe(true);
    expect(latch.trip(new Error('second'))).toBe(false);
    expect(seen).toEqual(['first']);
    expect(latch.signal.aborted).toBe(true);
    expect((latch.signal.reason as Error).message).toBe('first');
  });

  it('isolates a throwing listener from the others', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const latch = new LossLatch<Error>();
    const seen: string[] = [];
    latch.on(() => {
      throw new Error('bug in listener');
    });
    latch.on(() => seen.push('second'));
    latch.trip(new Error('lost'));
    expect(seen).toEqual(['second']);
    expect(warn).toHaveBeenCalledOnce();
    warn.mockRestore();
  });

  it('stops calling a disposed listener', () => {
    const latch = new LossLatch<Error>();
    let calls = 0;
    const sub = latch.on(() => calls++);
    sub[Symbol.dispose]();
    latch.trip(new Error('lost'));
    expect(calls).toBe(0);
  });

  it('tells a late listener at once (in a microtask)', async () => {
    const latch = new LossLatch<Error>();
    latch.trip(new Error('lost'));
    const reason = await new Promise<Error>((resolve) => latch.on(resolve));
    expect(reason.message).toBe('lost');
  });

  it('rejects a listener that is not a function', () => {
    const latch = new LossLatch<Error>();
    expect(() => latch.on('nope' as never)).toThrow(/listener must be a function/);
    try {
      latch.on(42 as never);
    } catch (err) {
      expect(isInvalidArgumentError(err)).toBe(true);
    }
  });
});
