import type { Redis, RedisOptions } from 'ioredis';
import { checkFence, checkResource, type FencedStore } from './contract.js';
import { InvalidArgumentError, StaleTokenError } from './errors.js';
import { FENCE_SCRIPT, FENCE_SCRIPT_SHA1 } from './redis-script.js';
import { parseToken, type TokenInput } from './token.js';

export { FENCE_SCRIPT, FENCE_SCRIPT_SHA1 };

/**
 * Fencing in Redis: a fence key per resource holds the highest accepted token as a canonical
 * decimal string, and one Lua script checks it, advances it and applies the write's commands,
 * atomically. See `redis-script.ts` for the comparison rule.
 */

/** Defaults for every option in this module, in one place. */
export const redisDefaults = {
  /** Prepended to every key {@link redisStore} writes. */
  prefix: 'leasehold:',
} as const;

/**
 * ioredis options under which a fenced write is sent at most once. Spread them into the options
 * of the client you fence with: `new Redis(url, { ...safeRedisOptions })`.
 *
 * By default ioredis sends again, after a reconnect, every command whose reply it had not yet
 * read. If Redis had applied it, it is applied twice, and its token (equal, so accepted) does not
 * stop it: one fenced `INCR`, `LPUSH` or `XADD` counts twice. With these options such a command
 * rejects instead (`MaxRetriesPerRequestError`), its outcome unknown.
 *
 * - `autoResendUnfulfilledCommands: false`: do not resend commands that were sent and unanswered.
 * - `maxRetriesPerRequest: 0`: how many reconnections a pending command waits through before it
 *   is rejected. 0 rejects it at the first lost connection. It is needed too: with ioredis 5 and
 *   only the first option, an unanswered command's promise never settles after a reconnect.
 *   Commands issued while disconnected (the offline queue) are sent once the next connection is
 *   ready, or rejected if that attempt fails.
 */
export const safeRedisOptions = {
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
} as const satisfies RedisOptions;

/** An ioredis client or cluster: only `evalsha` and `eval` are used. */
export type RedisScripting = Pick<Redis, 'evalsha' | 'eval'>;

export type RedisArg = string | number | Buffer;

/**
 * One command of a fenced write: the name, the key it writes, then its other arguments. For
 * `DEL` and `UNLINK` every argument is a key.
 */
export type RedisCommand = readonly [command: string, key: string, ...args: RedisArg[]];

/**
 * The commands a fenced write may run, and which of their arguments are keys. Limited to
 * single-key writes whose keys are known up front, because a script must declare every key it
 * touches; blocking, scripting, transaction and admin commands cannot run in a script anyway.
 */
const ALLOWED: Readonly<Record<string, 'first' | 'all'>> = Object.fromEntries([
  ...['DEL', 'UNLINK'].map((c) => [c, 'all'] as const),
  ...`SET SETEX PSETEX SETNX SETRANGE APPEND GETSET GETDEL INCR INCRBY INCRBYFLOAT DECR DECRBY
      SETBIT EXPIRE PEXPIRE EXPIREAT PEXPIREAT PERSIST HSET HSETNX HDEL HINCRBY HINCRBYFLOAT
      LPUSH RPUSH LPOP RPOP LSET LTRIM LREM LINSERT SADD SREM ZADD ZREM ZINCRBY ZREMRANGEBYSCORE
      ZREMRANGEBYRANK XADD XTRIM XDEL PFADD`
    .split(/\s+/)
    .map((c) => [c, 'first'] as const),
]);

export interface FencedExec {
  /** The key that holds the resource's highest token. It never expires; keep it with the data. */
  fenceKey: string;
  token: TokenInput;
  /** Run in order after the fence check; at least one. */
  commands: readonly RedisCommand[];
  /** The name a {@link StaleTokenError} reports. Default: the fence key. */
  resource?: string;
}

/**
 * Runs `commands` iff `token` >= the fence key's token, advancing the fence key in the same
 * script. Returns each command's reply.
 *
 * @throws StaleTokenError when the fence key holds a higher token; nothing was changed.
 */
export async function fencedExec(redis: RedisScripting, exec: FencedExec): Promise<unknown[]> {
  const fenceKey = checkResource(exec.fenceKey);
  const token = parseToken(exec.token);
  const { keys, argv } = encode(exec.commands);
  const args = [fenceKey, ...keys, token.toString(), String(exec.commands.length), ...argv];
  const reply = (await evalFence(redis, 1 + keys.length, args)) as [number, ...unknown[]];
  if (reply[0] === 1) return reply.slice(1);
  throw new StaleTokenError(exec.resource ?? fenceKey, token, BigInt(String(reply[1])));
}

/** `SET key value` under the fence. */
export async function fencedSet(
  redis: RedisScripting,
  write: { fenceKey: string; token: TokenInput; key: string; value: RedisArg },
): Promise<void> {
  await fencedExec(redis, { ...write, commands: [['SET', write.key, write.value]] });
}

/** `HSET key field value ...` under the fence. */
export async function fencedHset(
  redis: RedisScripting,
  write: { fenceKey: string; token: TokenInput; key: string; fields: Record<string, RedisArg> },
): Promise<void> {
  const pairs = Object.entries(write.fields).flat();
  if (pairs.length === 0) {
    throw new InvalidArgumentError(`invalid fields {} for HSET ${write.key}: allowed: one or more`);
  }
  await fencedExec(redis, { ...write, commands: [['HSET', write.key, ...pairs]] });
}

/** `DEL key ...` under the fence. */
export async function fencedDel(
  redis: RedisScripting,
  write: { fenceKey: string; token: TokenInput; keys: readonly [string, ...string[]] },
): Promise<void> {
  await fencedExec(redis, { ...write, commands: [['DEL', ...write.keys]] });
}

function encode(commands: readonly RedisCommand[]): { keys: string[]; argv: (string | Buffer)[] } {
  const list: unknown = commands;
  if (!Array.isArray(list) || list.length === 0) {
    throw new InvalidArgumentError(
      'invalid commands []: allowed: one or more [command, key, ...args]',
    );
  }
  const keys: string[] = [];
  const argv: (string | Buffer)[] = [];
  // KEYS[1] is the fence key, so data keys start at index 2.
  const keyIndex = (key: string): string => {
    let i = keys.indexOf(key);
    if (i < 0) i = keys.push(key) - 1;
    return String(i + 2);
  };
  for (const command of commands) {
    const [name, ...rest] = command;
    const upper = typeof name === 'string' ? name.toUpperCase() : '';
    const kind = ALLOWED[upper];
    if (kind === undefined) {
      throw new InvalidArgumentError(
        `invalid Redis command ${JSON.stringify(name)} in a fenced write: allowed: ${Object.keys(ALLOWED).join(', ')}`,
      );
    }
    const keyArgs = kind === 'all' ? rest : rest.slice(0, 1);
    const otherArgs = kind === 'all' ? [] : rest.slice(1);
    if (keyArgs.length === 0 || !keyArgs.every((k) => typeof k === 'string' && k.length > 0)) {
      throw new InvalidArgumentError(
        `invalid keys for ${upper}: allowed: non-empty strings, at least one`,
      );
    }
    argv.push(upper, String(keyArgs.length), String(otherArgs.length));
    argv.push(...keyArgs.map((k) => keyIndex(k as string)));
    argv.push(...otherArgs.map((arg) => argument(upper, arg)));
  }
  return { keys, argv };
}

function argument(command: string, arg: unknown): string | Buffer {
  if (typeof arg === 'string' || Buffer.isBuffer(arg)) return arg;
  if (typeof arg === 'number' && Number.isFinite(arg)) return String(arg);
  throw new InvalidArgumentError(
    `invalid argument ${String(arg)} for ${command}: allowed: strings, Buffers, finite numbers`,
  );
}

async function evalFence(
  redis: RedisScripting,
  numKeys: number,
  args: (string | Buffer)[],
): Promise<unknown> {
  try {
    return await redis.evalsha(FENCE_SCRIPT_SHA1, numKeys, ...args);
  } catch (err) {
    // The script cache is empty after a restart, failover or SCRIPT FLUSH: send it once in full.
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    return redis.eval(FENCE_SCRIPT, numKeys, ...args);
  }
}

export interface RedisStoreOptions {
  /** Prepended to every key. Default `leasehold:`. */
  prefix?: string;
}

/**
 * A {@link FencedStore} of one value per resource: a hash `<prefix>{<resource>}:value` with fields
 * `value` and `token`, fenced by `<prefix>{<resource>}:fence`. The braces put both keys in one
 * Redis Cluster slot.
 */
export function redisStore(
  redis: RedisScripting & Pick<Redis, 'hmget' | 'get'>,
  options: RedisStoreOptions = {},
): FencedStore {
  const prefix = options.prefix ?? redisDefaults.prefix;
  const keys = (resource: string) => {
    const base = `${prefix}{${checkResource(resource)}}`;
    return { value: `${base}:value`, fence: `${base}:fence` };
  };
  return {
    async write(write) {
      const { resource, token } = checkFence(write);
      const k = keys(resource);
      const t = token.toString();
      await fencedExec(redis, {
        fenceKey: k.fence,
        token: t,
        commands: [['HSET', k.value, 'value', write.value, 'token', t]],
        resource,
      });
    },
    async read(resource) {
      const [value, token] = await redis.hmget(keys(resource).value, 'value', 'token');
      if (value === null || value === undefined || token === null || token === undefined) {
        return undefined;
      }
      return { value, token: BigInt(token) };
    },
    async highestToken(resource) {
      const token = await redis.get(keys(resource).fence);
      return token === null ? undefined : BigInt(token);
    },
  };
}
