import { describe, expect, it } from 'vitest';
import { MemoryFaults } from './faults.js';

describe('MemoryFaults', () => {
  it('hands each planted fault to the next calls it is aimed at, `count` times, in order', () => {
    const faults = new MemoryFaults();
    faults.failNext({ only: 'lease', count: 2 });
    faults.hangNext({ applied: true });
    expect(faults.take('kv')).toEqual({ kind: 'hang', applied: true });
    expect(faults.take('kv')).toBeUndefined();
    expect(faults.take('lease')).toEqual({ kind: 'fail' });
    expect(faults.take('lease')).toEqual({ kind: 'fail' });
    expect(faults.take('lease')).toBeUndefined();
    faults.hangNext();
    faults.clear();
    expect(faults.take('kv')).toBeUndefined();
  });

  it('refuses bad options, naming the value and what is allowed', () => {
    const faults = new MemoryFaults();
    expect(() => faults.hangNext({ count: 1.5 })).toThrow(
      'hangNext options.count must be a whole number of calls, 1 or more, got 1.5',
    );
    expect(() => faults.hangNext({ applied: 'yes' as never })).toThrow(
      /hangNext options.applied must be true or false, got "yes"/,
    );
  });
});
