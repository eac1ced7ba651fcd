// A Redis lock peer for the uncontended scenario: Redlock (one Redis) against the two raw
// commands a single-instance Redis lock needs, SET NX PX and a compare-and-delete script.
import { Redis } from 'ioredis';
import { latencyRow, judged } from './rows.mjs';
import { interleave, percentile } from './stats.mjs';

const UNLOCK =
  "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/** Connects to REDIS_URL (default localhost), or resolves undefined with why not. */
export async function redisClient(options = {}) {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redis = new Redis(url, {
    lazyConnect: true,
    retryStrategy: () => null,
    maxRetriesPerRequest: 1,
    ...options, // fenced writes need safeRedisOptions
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return { redis, url };
  } catch {
    redis.disconnect();
    return { redis: undefined, url };
  }
}

export async function redisLock(ctx, { rounds, perRound }) {
  const scenario = 'uncontended';
  const { redis, url } = await redisClient();
  if (!redis) {
    return [{ scenario, name: 'Redis lock rows', note: `skipped: nothing answered at ${url}` }];
  }
  let Redlock;
  try {
    ({ default: Redlock } = await import('redlock'));
  } catch (err) {
    redis.disconnect();
    return [{ scenario, name: 'Redis lock rows', note: `skipped: redlock: ${err.message}` }];
  }
  const redlock = new Redlock([redis], { retryCount: 0 });
  const key = `bench:${Math.random().toString(36).slice(2, 8)}`;
  try {
    const { samples } = await interleave(
      {
        raw: async (i) => {
          const token = `t${i}`;
          if ((await redis.set(`${key}:raw`, token, 'PX', 10_000, 'NX')) !== 'OK') {
            throw new Error('raw SET NX found the key taken');
          }
          await redis.eval(UNLOCK, 1, `${key}:raw`, token);
        },
        redlock: async () => {
          const lock = await redlock.acquire([`${key}:redlock`], 10_000);
          await lock.release();
        },
      },
      { rounds, perRound, warmup: 30 },
    );
    const base = percentile(samples.raw, 0.5);
    return [
      judged(
        latencyRow(scenario, 'Redis SET NX PX + compare-and-delete (Redis baseline)', samples.raw),
        1,
        'baseline',
      ),
      judged(
        latencyRow(scenario, 'redlock acquire + release (1 Redis)', samples.redlock),
        percentile(samples.redlock, 0.5) / base,
        'peer',
      ),
    ];
  } finally {
    await redis.quit().catch(() => redis.disconnect());
  }
}
