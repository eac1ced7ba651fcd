import { describe, expect, it } from 'vitest';
import { flush } from './clock.fake.js';
import { Slots } from './slots.js';

describe('Slots', () => {
  it('lets one entry per key in at a time, in order, and says who holds', async () => {
    const slots = new Slots();
    const a = slots.enter('k');
    const b = slots.enter('k');
    await a.turn;
    let bIn = false;
    void b.turn.then(() => (bIn = true));
    await flush();
    expect(bIn).toBe(false);
    a.held(7n);
    expect(slots.busy('k')).toBe(7n);
    a.leave();
    await flush();
    expect(bIn).toBe(true);
    b.idle();
    expect(slots.busy('k')).toBeUndefined();
    expect(slots.owns('k')).toBe(true); // b's key may still be being removed
    b.leave();
    await flush();
    expect(slots.owns('k')).toBe(false);
  });

  it('keys are independent', async () => {
    const slots = new Slots();
    const a = slots.enter('k1');
    const b = slots.enter('k2');
    await Promise.all([a.turn, b.turn]);
    a.held(1n);
    expect(slots.busy('k2')).toBe(0n);
  });
});
