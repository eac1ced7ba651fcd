import { describe, expect, it } from 'vitest';
import { isInvalidArgumentError, isStaleTokenError, type StaleTokenError } from './errors.js';
import { FENCE_SCRIPT, FENCE_SCRIPT_SHA1 } from './redis-script.js';
import { Cluster, Redis } from 'ioredis';
import {
  fencedExec,
  fencedSet,
  redisStore,
  safeRedisOptions,
  type RedisScripting,
} from './redis.js';

function fakeRedis(reply: unknown, cached = true) {
  const calls: { method: string; args: unknown[] }[] = [];
  const redis: RedisScripting = {
    async evalsha(...args: unknown[]) {
      calls.push({ method: 'evalsha', args });
      if (!cached) throw new Error('NOSCRIPT No matching script. Please use EVAL.');
      return reply;
    },
    async eval(...args: unknown[]) {
      calls.push({ method: 'eval', args });
      return reply;
    },
  };
  return { redis, calls };
}

describe('fencedExec', () => {
  it('declares every key and sends the token as a canonical string', async () => {
    const { redis, calls } = fakeRedis([1, 'OK', 1]);
    const results = await fencedExec(redis, {
      fenceKey: 'f',
      token: 9007199254740993n,
      commands: [
        ['set', 'a', 'x'],
        ['DEL', 'a', 'b'],
      ],
    });
    expect(results).toEqual(['OK', 1]);
    expect(calls[0]?.args).toEqual([
      FENCE_SCRIPT_SHA1,
      3,
      'f',
      'a',
      'b',
      '9007199254740993',
      '2',
      'SET',
      '1',
      '1',
      '2',
      'x',
      'DEL',
      '2',
      '0',
      '2',
      '3',
    ]);
  });

  it('falls back to EVAL once when the script is not cached', async () => {
    const { redis, calls } = fakeRedis([1, 'OK'], false);
    await fencedExec(redis, { fenceKey: 'f', token: 1n, commands: [['SET', 'a', 'x']] });
    expect(calls.map((c) => c.method)).toEqual(['evalsha', 'eval']);
    expect(calls[1]?.args[0]).toBe(FENCE_SCRIPT);
  });

  it('turns a stale reply into StaleTokenError with the exact highest token', async () => {
    const { redis } = fakeRedis([0, '9223372036854775807']);
    const err = await fencedExec(redis, {
      fenceKey: 'f',
      token: 5n,
      commands: [['SET', 'a', 'x']],
      resource: 'orders',
    }).catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(true);
    expect((err as StaleTokenError).highestToken).toBe(9223372036854775807n);
    expect((err as StaleTokenError).resource).toBe('orders');
  });

  it.each<[string, unknown]>([
    ['no commands', []],
    ['a command that is not allowed', [['EVAL', 'a', 'return 1']]],
    ['FLUSHALL', [['FLUSHALL', 'x']]],
    ['a missing key', [['SET']]],
    ['an empty key', [['SET', '', 'x']]],
    ['an object argument', [['SET', 'a', { x: 1 }]]],
    ['a NaN argument', [['INCRBY', 'a', NaN]]],
  ])('refuses %s before sending anything', async (_label, commands) => {
    const { redis, calls } = fakeRedis([1]);
    const err = await fencedExec(redis, {
      fenceKey: 'f',
      token: 1n,
      commands: commands as never,
    }).catch((e: unknown) => e);
    expect(isInvalidArgumentError(err)).toBe(true);
    expect((err as Error).message).toMatch(/ must be .*, got /);
    expect(calls).toEqual([]);
  });
});

describe('FENCE_SCRIPT', () => {
  it('never converts tokens to numbers', () => {
    // tonumber is used only for the command count and argument counts, never on a token.
    const uses = FENCE_SCRIPT.match(/tonumber\([^)]*\)/g) ?? [];
    expect(uses).toEqual([
      'tonumber(ARGV[2])',
      'tonumber(ARGV[at + 1])',
      'tonumber(ARGV[at + 2])',
      'tonumber(ARGV[at])',
    ]);
  });
});

describe('clients without safeRedisOptions', () => {
  // lazyConnect: nothing is sent; the refusal must come before any I/O anyway.
  const write = (redis: RedisScripting) =>
    fencedSet(redis, { fenceKey: 'f', token: 1n, key: 'k', value: 'v' });

  it('refuses an ioredis client with the defaults, naming both options and the fix', async () => {
    const redis = new Redis({ lazyConnect: true });
    const err = await write(redis).catch((e: unknown) => e);
    expect(isInvalidArgumentError(err)).toBe(true);
    const message = (err as Error).message;
    expect(message).toMatch(/autoResendUnfulfilledCommands is true, must be false/);
    expect(message).toMatch(/maxRetriesPerRequest is 20, must be 0/);
    expect(message).toMatch(/new Redis\(url, \{ \.\.\.safeRedisOptions \}\)/);
    expect(() => redisStore(redis)).toThrow(
      /^the Redis client of a fenced write must be created with safeRedisOptions /,
    );
    expect(redis.status).toBe('wait'); // never connected
  });

  it('refuses a client with only one of the two options', async () => {
    const redis = new Redis({ lazyConnect: true, autoResendUnfulfilledCommands: false });
    const err = await write(redis).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/maxRetriesPerRequest is 20, must be 0/);
    expect((err as Error).message).not.toMatch(/autoResendUnfulfilledCommands/);
  });

  it('refuses a cluster whose redisOptions leave them out', () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    expect(() => redisStore(cluster)).toThrow(
      /autoResendUnfulfilledCommands is unset \(ioredis resends\), must be false/,
    );
    const safe = new Cluster([{ host: '127.0.0.1', port: 1 }], {
      lazyConnect: true,
      redisOptions: { ...safeRedisOptions },
    });
    expect(() => redisStore(safe)).not.toThrow();
  });

  it('accepts a client created with safeRedisOptions', () => {
    const redis = new Redis({ lazyConnect: true, ...safeRedisOptions });
    expect(() => redisStore(redis)).not.toThrow();
  });
});
