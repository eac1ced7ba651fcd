import { isStaleTokenError, type StaleTokenError } from '@leasehold/fence';
import { describeFenceConformance } from '@leasehold/fence/conformance';
import {
  FENCE_SCRIPT,
  fencedDel,
  fencedExec,
  fencedHset,
  fencedSet,
  redisStore,
} from '@leasehold/fence/redis';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWith, findRedis, redisClient, uniqueName } from './stores.js';

describeWith(await findRedis(), 'fence: Redis', (url) => {
  // Every key this file writes starts with this prefix; cleanup deletes exactly those keys.
  const prefix = `${uniqueName('redis')}:`;
  const clients: Redis[] = [];
  const connect = async (): Promise<Redis> => {
    const redis = redisClient(url);
    clients.push(redis);
    await redis.connect();
    return redis;
  };
  let redis: Redis;
  beforeAll(async () => {
    redis = await connect();
  });
  afterAll(async () => {
    const stream = redis.scanStream({ match: `${prefix}*`, count: 500 });
    for await (const keys of stream as AsyncIterable<string[]>) {
      if (keys.length > 0) await redis.del(...keys);
    }
    await Promise.all(clients.map((client) => client.quit()));
  });

  describeFenceConformance('redis', async () => ({
    store: redisStore(await connect(), { prefix }),
    reopen: async () => redisStore(await connect(), { prefix }),
  }));

  it('applies SET, HSET and DEL under the fence and rejects a stale token with no effect', async () => {
    const fenceKey = `${prefix}job:fence`;
    const [a, h] = [`${prefix}job:a`, `${prefix}job:h`];
    await fencedSet(redis, { fenceKey, token: 9007199254740993n, key: a, value: 'one' });
    await fencedHset(redis, {
      fenceKey,
      token: 9007199254740993n,
      key: h,
      fields: { x: '1', y: 2 },
    });
    expect(await redis.get(a)).toBe('one');
    expect(await redis.hgetall(h)).toEqual({ x: '1', y: '2' });

    const err = await fencedDel(redis, {
      fenceKey,
      token: 9007199254740992n,
      keys: [a, h],
    }).catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(true);
    expect((err as StaleTokenError).highestToken).toBe(9007199254740993n);
    expect(await redis.exists(a, h)).toBe(2);

    await fencedDel(redis, { fenceKey, token: 9007199254740994n, keys: [a, h] });
    expect(await redis.exists(a, h)).toBe(0);
    expect(await redis.get(fenceKey)).toBe('9007199254740994');
  });

  it('runs a user command list in order and returns each reply', async () => {
    const fenceKey = `${prefix}counter:fence`;
    const counter = `${prefix}counter`;
    const list = `${prefix}counter:log`;
    const replies = await fencedExec(redis, {
      fenceKey,
      token: 3n,
      commands: [
        ['INCRBY', counter, 5],
        ['RPUSH', list, 'five'],
        ['PEXPIRE', list, 60_000],
        ['incrby', counter, '2'],
      ],
    });
    expect(replies).toEqual([5, 1, 1, 7]);
  });

  it('refuses to compare against a fence key that does not hold a canonical token', async () => {
    const fenceKey = `${prefix}corrupt:fence`;
    await redis.set(fenceKey, '0042');
    const err = await fencedSet(redis, {
      fenceKey,
      token: 100n,
      key: `${prefix}corrupt`,
      value: 'x',
    }).catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(false);
    expect((err as Error).message).toMatch(/not a canonical token/);
    expect(await redis.exists(`${prefix}corrupt`)).toBe(0);
  });
  // The script is exported for SCRIPT LOAD, so it must defend itself: callers of EVAL skip
  // parseToken. Each case runs on a fresh fence key (absent) and on one that holds token 10.
  it.each([
    ['negative', '-50'],
    ['zero', '0'],
    ['leading zero', '007'],
    ['plus sign', '+5'],
    ['space', ' 5'],
    ['trailing newline', '5\n'],
    ['exponent', '1e5'],
    ['hex', '0x10'],
    ['fraction', '5.0'],
    ['empty', ''],
    ['above int64', '9223372036854775808'],
    ['20 digits', '10000000000000000000'],
    ['letters', 'abc'],
  ])(
    'the raw script refuses an ARGV token that is not canonical (%s) and changes nothing',
    async (label, token) => {
      for (const stored of [undefined, '10']) {
        const fenceKey = `${prefix}raw-${label.replaceAll(' ', '-')}-${stored ?? 'none'}:fence`;
        const dataKey = `${prefix}raw-${label.replaceAll(' ', '-')}-${stored ?? 'none'}`;
        if (stored !== undefined) await redis.set(fenceKey, stored);
        const err = await redis
          .eval(FENCE_SCRIPT, 2, fenceKey, dataKey, token, '1', 'SET', '1', '1', '2', 'written')
          .catch((e: unknown) => e);
        expect(err, `stored ${stored}`).toBeInstanceOf(Error);
        expect((err as Error).message).toMatch(
          /fencing token in ARGV\[1\] must be a canonical decimal string .*, got "/,
        );
        expect(await redis.get(fenceKey)).toBe(stored ?? null);
        expect(await redis.exists(dataKey)).toBe(0);
      }
    },
  );

  it('the raw script accepts the int64 maximum and refuses a stored value above it', async () => {
    const fenceKey = `${prefix}raw-max:fence`;
    const dataKey = `${prefix}raw-max`;
    const max = '9223372036854775807';
    await redis.eval(FENCE_SCRIPT, 2, fenceKey, dataKey, max, '1', 'SET', '1', '1', '2', 'max');
    expect(await redis.get(fenceKey)).toBe(max);
    await redis.set(fenceKey, '9223372036854775808');
    const err = await redis
      .eval(FENCE_SCRIPT, 2, fenceKey, dataKey, max, '1', 'SET', '1', '1', '2', 'over')
      .catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/not a canonical token/);
    expect(await redis.get(dataKey)).toBe('max');
  });
});
