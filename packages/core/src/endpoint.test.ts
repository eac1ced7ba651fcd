import { BrokenCircuitError } from 'cockatiel';
import { GRPCCancelledError, GRPCDeadlineExceededError, GRPCUnavailableError } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { fakeClock } from './clock.fake.js';
import { endpointOf, logRetries, watchMember } from './endpoint.js';
import { EtcdUnavailableError } from './errors.js';
import { recordingLogger } from './logger.fake.js';

const passThrough = { execute: async <T>(fn: () => T | Promise<T>) => fn() };
const A = 'http://10.0.0.1:2379';

describe('watchMember', () => {
  it('logs once when a member stops answering, and once when it answers again', async () => {
    const { lines, logger } = recordingLogger();
    const member = watchMember(A, passThrough, logger);
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
    const member = watchMember(A, passThrough, logger);
    await member.execute(() => Promise.reject(new GRPCCancelledError('cancelled'))).catch(() => {});
    expect(lines).toEqual([]);
    await member.execute(() => Promise.reject(new GRPCUnavailableError('x'))).catch(() => {});
    await member.execute(() => Promise.reject(new GRPCCancelledError('cancelled'))).catch(() => {});
    await member.execute(() => Promise.reject(new Error('permission denied'))).catch(() => {});
    expect(lines.map((l) => l.level)).toEqual(['warn', 'info']);
  });

  it('remembers the endpoint of a stream it opened and of an error (also when wrapped)', async () => {
    const { logger } = recordingLogger();
    const member = watchMember(A, passThrough, logger);
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
    const resting = {
      execute: async <T>(_fn: () => T | Promise<T>): Promise<T> => {
        throw new BrokenCircuitError();
      },
    };
    const member = watchMember(A, resting, logger);
    const err = await member.execute(async () => 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BrokenCircuitError);
    expect(endpointOf(err)).toBeUndefined(); // not sent there: not that member's failure
    expect(lines.map((l) => [l.level, l.fields.endpoint])).toEqual([['debug', A]]);
  });
});

describe('logRetries', () => {
  it('logs every attempt after the first: what, attempt, delay since the failure, endpoint, error', async () => {
    const { lines, logger } = recordingLogger();
    const clock = fakeClock();
    const member = watchMember(A, passThrough, logger);
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
