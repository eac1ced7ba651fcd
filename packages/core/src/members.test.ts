import { BrokenCircuitError } from 'cockatiel';
import { GRPCCancelledError, GRPCDeadlineExceededError, GRPCUnavailableError } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { fakeClock } from './clock.fake.js';
import { Members, memberRest } from './members.js';

const answer = { header: {} };
const hang = () => Promise.reject(new GRPCDeadlineExceededError('deadline'));
const refused = () =>
  Promise.reject(new GRPCUnavailableError('14 UNAVAILABLE: No connection established'));
const reset = () => Promise.reject(new GRPCUnavailableError('14 UNAVAILABLE: Connection dropped'));

/** Whether a call may go to `policy` now (true) or was turned away before being sent. */
const admits = (policy: { execute<T>(fn: () => T | Promise<T>): Promise<T> }) =>
  policy
    .execute(() => answer)
    .then(
      () => true,
      (err: unknown) => {
        if (err instanceof BrokenCircuitError) return false;
        throw err;
      },
    );

function three() {
  const clock = fakeClock();
  const members = new Members(clock);
  return { clock, members, all: [members.add(), members.add(), members.add()] as const };
}

describe('Members', () => {
  it('rests a member whose call hung until it answers again, while another member is clean', async () => {
    const clock = fakeClock();
    const members = new Members(clock);
    const [a, b] = [members.add('http://a:1'), members.add('http://b:1')];
    await expect(a.execute(hang)).rejects.toBeInstanceOf(GRPCDeadlineExceededError);
    expect(await admits(a)).toBe(false);
    clock.advance(10 * memberRest.hangRestMs);
    expect([await admits(a), await admits(b)]).toEqual([false, true]); // b is clean: b serves
    members.answered('http://a:1'); // e.g. its keepalive stream was answered
    expect(await admits(a)).toBe(true);
  });

  it('rests a member that refuses connections like a hung one, and one that resets only after 3 in a row', async () => {
    const { clock, all } = three();
    const [a, b] = all;
    await expect(a.execute(refused)).rejects.toBeInstanceOf(GRPCUnavailableError);
    expect(await admits(a)).toBe(false);
    for (let i = 0; i < memberRest.fastFailures - 1; i++) {
      await expect(b.execute(reset)).rejects.toBeInstanceOf(GRPCUnavailableError);
      expect(await admits(b)).toBe(true); // an answer in between starts the count again
    }
    for (let i = 0; i < memberRest.fastFailures; i++) {
      await expect(b.execute(reset)).rejects.toBeInstanceOf(GRPCUnavailableError);
    }
    expect(await admits(b)).toBe(false);
    clock.advance(memberRest.fastRestMs);
    expect(await admits(b)).toBe(true);
  });

  it('does not count an opened stream as an answer: a dropped stream keeps its member suspect', async () => {
    const clock = fakeClock();
    const members = new Members(clock);
    const [a, b] = [members.add('http://a:1'), members.add('http://b:1')];
    await expect(
      a.execute(() => Promise.reject(new GRPCCancelledError('cancelled'))),
    ).rejects.toBeInstanceOf(GRPCCancelledError);
    await expect(b.execute(hang)).rejects.toThrow(); // nobody clean
    clock.advance(memberRest.hangRestMs);
    await a.execute(() => ({ write() {} })); // a stream: opened locally, proves nothing
    members.answered('http://b:1');
    expect([await admits(a), await admits(b)]).toEqual([false, true]);
  });

  it('rests a member at once when a stream on it is reported stuck', async () => {
    const clock = fakeClock();
    const members = new Members(clock);
    const [a, b] = [members.add('http://a:1'), members.add('http://b:1')];
    members.stuck('http://a:1');
    members.stuck('http://elsewhere:1'); // not a member: ignored
    members.stuck(undefined);
    expect([await admits(a), await admits(b)]).toEqual([false, true]);
  });

  it('when every member rests, lets calls go to the one with the fewest hangs, soonest due first', async () => {
    const { clock, all } = three();
    const [a, b, c] = all;
    await expect(a.execute(hang)).rejects.toThrow(); // a: 1 hang
    await expect(b.execute(hang)).rejects.toThrow(); // b: 1 hang
    await expect(c.execute(hang)).rejects.toThrow(); // c: 1 hang
    clock.advance(memberRest.hangRestMs); // nobody clean: a rested member may be tried
    await expect(a.execute(hang)).rejects.toBeInstanceOf(GRPCDeadlineExceededError); // a: 2
    await expect(b.execute(hang)).rejects.toBeInstanceOf(GRPCDeadlineExceededError); // b: 2
    clock.advance(10);
    await expect(c.execute(hang)).rejects.toBeInstanceOf(GRPCDeadlineExceededError); // c: 2
    await expect(a.execute(hang)).rejects.toBeInstanceOf(GRPCDeadlineExceededError); // a: 3
    // All rest; b and c have 2 hangs, b's rest ends first.
    expect([await admits(a), await admits(c)]).toEqual([false, false]);
    expect(await admits(b)).toBe(true);
  });

  it('prefers members that answered since their last hang: a rest running out is not enough', async () => {
    const { clock, all } = three();
    const [a, b, c] = all;
    await expect(a.execute(hang)).rejects.toThrow(); // a froze
    clock.advance(memberRest.hangRestMs);
    expect([await admits(a), await admits(b), await admits(c)]).toEqual([false, true, true]);
    // A leader election: the others hang too, then answer once a leader is elected.
    await expect(b.execute(hang)).rejects.toThrow();
    await expect(c.execute(hang)).rejects.toThrow();
    clock.advance(memberRest.hangRestMs);
    expect(await admits(b)).toBe(true); // no clean member: a rested member may be tried
    expect(await admits(a)).toBe(false); // b answered: a, never answering, waits
  });

  it('clears a member whose stream was answered', async () => {
    const clock = fakeClock();
    const members = new Members(clock);
    const [a, b] = [members.add('http://a:1'), members.add('http://b:1')];
    await expect(a.execute(hang)).rejects.toThrow();
    expect(await admits(a)).toBe(false);
    members.answered('http://a:1');
    members.answered('http://elsewhere:1'); // not a member: ignored
    expect([await admits(a), await admits(b)]).toEqual([true, true]);
  });

  it('passes on what the call returns and what it throws', async () => {
    const { all } = three();
    await expect(all[0].execute(() => 42)).resolves.toBe(42);
    await expect(all[0].execute(() => Promise.reject(new Error('refused')))).rejects.toThrow(
      'refused',
    );
  });
});
