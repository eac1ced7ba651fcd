import { BrokenCircuitError } from 'cockatiel';
import { GRPCCancelledError, GRPCDeadlineExceededError, GRPCUnavailableError } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { fakeClock } from '../clock.fake.js';
import { EtcdUnavailableError } from '../errors.js';
import { recordingLogger } from '../logger.fake.js';
import type { Logger } from '../logger.js';
import { endpointOf, logRetries, Members, memberRest } from './members.js';

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

const A = 'http://10.0.0.1:2379';
const B = 'http://10.0.0.2:2379';
/** A member's policy that logs to `logger`: the only member, so it is never skipped. */
const watchMember = (endpoint: string, logger: Logger) =>
  new Members(fakeClock(), memberRest, logger).add(endpoint);

describe('member logs and endpoints', () => {
  it('logs once when a member stops answering, and once when it answers again', async () => {
    const { lines, logger } = recordingLogger();
    const member = watchMember(A, logger);
    const down = () => member.execute(() => Promise.reject(new GRPCUnavailableError('refused')));
    await expect(down()).rejects.toThrow('refused');
    await expect(down()).rejects.toThrow('refused');
    await expect(
      member.execute(() => Promise.reject(new GRPCDeadlineExceededError())),
    ).rejects.toThrow();
    await member.execute(async () => ({ header: {} }));
    await member.execute(async () => ({ header: {} }));
    expect(lines.map((l) => [l.level, l.fields.endpoint, l.message])).toEqual([
      [
        'warn',
        A,
        'etcd member did not answer; calls fail over to the other members until it answers again',
      ],
      ['info', A, 'etcd member answers again'],
    ]);
    expect(lines[0]!.fields.err).toBeInstanceOf(GRPCUnavailableError);
  });

  it('a refusal is an answer; a cancelled stream is neither failure nor recovery', async () => {
    const { lines, logger } = recordingLogger();
    const member = watchMember(A, logger);
    await member.execute(() => Promise.reject(new GRPCCancelledError('cancelled'))).catch(() => {});
    expect(lines).toEqual([]);
    await member.execute(() => Promise.reject(new GRPCUnavailableError('x'))).catch(() => {});
    await member.execute(() => Promise.reject(new GRPCCancelledError('cancelled'))).catch(() => {});
    await member.execute(() => Promise.reject(new Error('permission denied'))).catch(() => {});
    expect(lines.map((l) => l.level)).toEqual(['warn', 'info']);
  });

  it('remembers the endpoint of a stream it opened and of an error (also when wrapped)', async () => {
    const { logger } = recordingLogger();
    const member = watchMember(A, logger);
    const stream = await member.execute(async () => ({ on() {} }));
    expect(endpointOf(stream)).toBe(A);
    const raw = await member
      .execute(() => Promise.reject(new GRPCUnavailableError('x')))
      .catch((e: unknown) => e);
    expect(endpointOf(raw)).toBe(A);
    expect(endpointOf(new EtcdUnavailableError('etcd call failed', { cause: raw }))).toBe(A);
    expect(endpointOf(new Error('elsewhere'))).toBeUndefined();
    expect(endpointOf(undefined)).toBeUndefined();
  });

  it('a call the member policy refuses to send is logged at debug only', async () => {
    const { lines, logger } = recordingLogger();
    const members = new Members(fakeClock(), memberRest, logger);
    const resting = members.add(A);
    members.add(B); // clean: A, which hung, rests while B can serve
    await resting.execute(() => Promise.reject(new GRPCDeadlineExceededError())).catch(() => {});
    lines.length = 0;
    const err = await resting.execute(async () => 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokenCircuitError);
    expect(endpointOf(err)).toBeUndefined(); // not sent there: not that member's failure
    expect(lines.map((l) => [l.level, l.fields.endpoint])).toEqual([['debug', A]]);
  });
});

describe('logRetries', () => {
  it('logs every attempt after the first: what, attempt, delay since the failure, endpoint, error', async () => {
    const { lines, logger } = recordingLogger();
    const clock = fakeClock();
    const member = watchMember(A, logger);
    let calls = 0;
    const attempt = logRetries(logger, clock, 'lock join', () =>
      member.execute(async () => {
        if (++calls < 3) throw new GRPCUnavailableError('connection reset');
        return { header: {} };
      }),
    );
    await expect(attempt()).rejects.toThrow('connection reset');
    clock.advance(120);
    await expect(attempt()).rejects.toThrow('connection reset');
    clock.advance(240);
    await expect(attempt()).resolves.toEqual({ header: {} });
    const retries = lines.filter((l) => l.message === 'retrying etcd lock join');
    expect(retries.map((l) => ({ ...l.fields, err: undefined }))).toEqual([
      { what: 'lock join', attempt: 2, delayMs: 120, endpoint: A, err: undefined },
      { what: 'lock join', attempt: 3, delayMs: 240, endpoint: A, err: undefined },
    ]);
    expect(retries.every((l) => l.level === 'warn')).toBe(true);
  });

  it('leaves the endpoint out when no member was reached', async () => {
    const { lines, logger } = recordingLogger();
    let calls = 0;
    const attempt = logRetries(logger, fakeClock(), 'range', async () => {
      if (++calls === 1) throw new Error('no member usable');
      return 1;
    });
    await attempt().catch(() => {});
    await attempt();
    expect(lines).toHaveLength(1);
    expect('endpoint' in lines[0]!.fields).toBe(false);
  });
});
