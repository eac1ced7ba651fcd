/**
 * Fencing in Redis: a fence key per resource holds the highest accepted token as a canonical
 * decimal string, and one Lua script checks it, advances it and applies the write's commands,
 * atomically. See `redis-script.ts` for the comparison rule.
 *
 * @module @leasehold/fence/redis
 */
import type { Redis, RedisOptions } from 'ioredis';
import { checkObject, checkResource, checkWrite, keysOf, type FencedStore } from './contract.js';
import { invalid, InvalidArgumentError, StaleTokenError } from './errors.js';
import { FENCE_SCRIPT, FENCE_SCRIPT_SHA1 } from './redis-script.js';
import { parseToken, type TokenInput } from './token.js';

export { FENCE_SCRIPT, FENCE_SCRIPT_SHA1 };

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
  /** Do not resend, after a reconnect, commands that were sent and not answered. */
  autoResendUnfulfilledCommands: false,
  /** Reject a pending command at the first lost connection. */
  maxRetriesPerRequest: 0,
} as const satisfies RedisOptions;

/** An ioredis client or cluster: only `evalsha` and `eval` are used. */
export type RedisScripting = Pick<Redis, 'evalsha' | 'eval'>;

// Clients already found to carry safeRedisOptions: the check runs once per client.
const safeClients = new WeakSet<object>();

/**
 * Refuses an ioredis client (or cluster, through its `redisOptions`) that would resend a fenced
 * write after a reconnect, which applies it twice under an equal token. A client that is not
 * ioredis (no `options` object) cannot be checked and is taken as it is.
 */
function checkSafeClient(redis: object): void {
  if (safeClients.has(redis)) return;
  const options: unknown = (redis as { options?: unknown }).options;
  if (typeof options === 'object' && options !== null) {
    const own = (
      'redisOptions' in options
        ? ((options as { redisOptions?: unknown }).redisOptions ?? {})
        : options
    ) as Record<string, unknown>;
    const unsafe = (Object.keys(safeRedisOptions) as (keyof typeof safeRedisOptions)[])
      .filter((key) => own[key] !== safeRedisOptions[key])
      .map(
        (key) =>
          `${key} is ${own[key] === undefined ? 'unset (ioredis resends)' : JSON.stringify(own[key])}, must be ${String(safeRedisOptions[key])}`,
      );
    if (unsafe.length > 0) {
      throw new InvalidArgumentError(
        "the Redis client of a fenced write must be created with safeRedisOptions from '@leasehold/fence/redis' " +
          `(new Redis(url, { ...safeRedisOptions })), got one whose ${unsafe.join('; ')}. With these options ` +
          'ioredis resends a write whose reply was lost in a reconnect, and the fence accepts the copy ' +
          '(equal token), so it is applied twice',
      );
    }
  }
  safeClients.add(redis);
}

/** One argument of a {@link RedisCommand}: a string, a Buffer or a finite number. */
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

/** What {@link fencedExec} runs: the fence key, the token and the commands. */
export interface FencedExec {
  /** The key that holds the resource's highest token. It never expires; keep it with the data. */
  fenceKey: string;
  /** The writer's fencing token; the fence key keeps the highest it has accepted. */
  token: TokenInput;
  /** Run in order after the fence check; at least one. */
  commands: readonly RedisCommand[];
  /** The name a {@link StaleTokenError} reports. Default: the fence key. */
  resource?: string;
}

/** Every key of {@link FencedExec}. */
const FENCED_EXEC_KEYS = keysOf<FencedExec>()(['fenceKey', 'token', 'commands', 'resource']);

/**
 * Runs `commands` iff `token` >= the fence key's token, advancing the fence key in the same
 * script. Returns each command's reply.
 *
 * @throws StaleTokenError when the fence key holds a higher token; nothing was changed.
 *
 * @example
 * ```ts
 * const redis = new Redis(process.env.REDIS_URL!, { ...safeRedisOptions });
 * await fencedExec(redis, {
 *   fenceKey: 'fence:{invoice-42}',
 *   token: lock.token,
 *   commands: [
 *     ['HSET', 'invoice:{invoice-42}', 'sent', '1'],
 *     ['LPUSH', 'sent-log:{invoice-42}', '42'],
 *   ],
 * });
 * ```
 */
export async function fencedExec(redis: RedisScripting, exec: FencedExec): Promise<unknown[]> {
  checkObject('exec', exec, '{ fenceKey, token, commands, resource? }', FENCED_EXEC_KEYS);
  const fenceKey = checkResource(exec.fenceKey);
  return run(redis, fenceKey, parseToken(exec.token), exec.commands, exec.resource ?? fenceKey);
}

/** Every key of {@link fencedSet}'s write. */
const FENCED_SET_KEYS = keysOf<Parameters<typeof fencedSet>[1]>()([
  'fenceKey',
  'token',
  'key',
  'value',
]);

/** `SET key value` under the fence. */
export async function fencedSet(
  redis: RedisScripting,
  write: { fenceKey: string; token: TokenInput; key: string; value: RedisArg },
): Promise<void> {
  checkObject('write', write, '{ fenceKey, token, key, value }', FENCED_SET_KEYS);
  const fenceKey = checkResource(write.fenceKey);
  await run(redis, fenceKey, parseToken(write.token), [['SET', write.key, write.value]], fenceKey);
}

/** Every key of {@link fencedHset}'s write (`fields` is the user's hash: its keys are free). */
const FENCED_HSET_KEYS = keysOf<Parameters<typeof fencedHset>[1]>()([
  'fenceKey',
  'token',
  'key',
  'fields',
]);

/** `HSET key field value ...` under the fence. */
export async function fencedHset(
  redis: RedisScripting,
  write: { fenceKey: string; token: TokenInput; key: string; fields: Record<string, RedisArg> },
): Promise<void> {
  checkObject('write', write, '{ fenceKey, token, key, fields }', FENCED_HSET_KEYS);
  checkObject('write.fields', write.fields, '{ field: value, ... }');
  const pairs = Object.entries(write.fields).flat();
  if (pairs.length === 0) {
    throw new InvalidArgumentError(
      `write.fields must be one or more fields for HSET ${write.key}, got an empty object`,
    );
  }
  const fenceKey = checkResource(write.fenceKey);
  await run(redis, fenceKey, parseToken(write.token), [['HSET', write.key, ...pairs]], fenceKey);
}

/** Every key of {@link fencedDel}'s write. */
const FENCED_DEL_KEYS = keysOf<Parameters<typeof fencedDel>[1]>()(['fenceKey', 'token', 'keys']);

/** `DEL key ...` under the fence. */
export async function fencedDel(
  redis: RedisScripting,
  write: { fenceKey: string; token: TokenInput; keys: readonly [string, ...string[]] },
): Promise<void> {
  checkObject('write', write, '{ fenceKey, token, keys }', FENCED_DEL_KEYS);
  const fenceKey = checkResource(write.fenceKey);
  await run(redis, fenceKey, parseToken(write.token), [['DEL', ...write.keys]], fenceKey);
}

/**
 * One fenced write, as one `EVALSHA`. This is the hot path: a single flat argument list built
 * with pushes and one awaited command, because a fenced write costs one round trip and the
 * client-side work around it is a visible share of that on loopback.
 */
async function run(
  redis: RedisScripting,
  fenceKey: string,
  token: bigint,
  commands: readonly RedisCommand[],
  resource: string,
): Promise<unknown[]> {
  checkSafeClient(redis);
  const { keys, argv } = encode(commands);
  keys[0] = fenceKey;
  const numKeys = keys.length;
  keys.push(token.toString(), String(commands.length));
  for (const arg of argv) keys.push(arg);
  let reply: [number, ...unknown[]];
  try {
    reply = (await redis.evalsha(FENCE_SCRIPT_SHA1, numKeys, ...keys)) as typeof reply;
  } catch (err) {
    // The script cache is empty after a restart, failover or SCRIPT FLUSH: send it once in full.
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    reply = (await redis.eval(FENCE_SCRIPT, numKeys, ...keys)) as typeof reply;
  }
  if (reply[0] === 1) return reply.slice(1);
  throw new StaleTokenError(resource, token, BigInt(String(reply[1])));
}

/**
 * The script's KEYS (slot 0 left for the fence key) and the ARGV that follows the token and the
 * command count: per command `name, keyCount, argCount, keyIndex..., arg...`.
 */
function encode(commands: readonly RedisCommand[]): {
  keys: (string | Buffer)[];
  argv: (string | Buffer)[];
} {
  const list: unknown = commands;
  if (!Array.isArray(list) || list.length === 0) {
    throw invalid('commands', 'an array of one or more [command, key, ...args]', list);
  }
  const keys: (string | Buffer)[] = [''];
  const argv: (string | Buffer)[] = [];
  for (const command of commands) {
    const name = command[0];
    const upper = typeof name === 'string' ? name.toUpperCase() : '';
    const kind = ALLOWED[upper];
    if (kind === undefined) {
      throw invalid(
        'the Redis command of a fenced write',
        `one of ${Object.keys(ALLOWED).join(', ')}`,
        name,
      );
    }
    const keyCount = kind === 'all' ? command.length - 1 : Math.min(1, command.length - 1);
    if (keyCount === 0) {
      throw new InvalidArgumentError(
        `the keys of ${upper} must be at least one non-empty string, got none`,
      );
    }
    argv.push(upper, String(keyCount), String(command.length - 1 - keyCount));
    for (let i = 1; i <= keyCount; i++) {
      const key = command[i];
      if (typeof key !== 'string' || key.length === 0) {
        throw invalid(`a key of ${upper}`, 'a non-empty string', key);
      }
      // KEYS[1] is the fence key, so data keys start at index 2.
      let at = keys.indexOf(key, 1);
      if (at < 0) at = keys.push(key) - 1;
      argv.push(String(at + 1));
    }
    for (let i = 1 + keyCount; i < command.length; i++) argv.push(argument(upper, command[i]));
  }
  return { keys, argv };
}

function argument(command: string, arg: unknown): string | Buffer {
  if (typeof arg === 'string' || Buffer.isBuffer(arg)) return arg;
  if (typeof arg === 'number' && Number.isFinite(arg)) return String(arg);
  throw invalid(`an argument of ${command}`, 'a string, Buffer or finite number', arg);
}

/** Options of {@link redisStore}; every field is optional. */
export interface RedisStoreOptions {
  /** Prepended to every key. Default `leasehold:`. */
  prefix?: string;
}

/** Every key of {@link RedisStoreOptions}. */
const REDIS_STORE_OPTION_KEYS = keysOf<RedisStoreOptions>()(['prefix']);

/**
 * A {@link FencedStore} of one value per resource: a hash `<prefix>{<resource>}:value` with fields
 * `value` and `token`, fenced by `<prefix>{<resource>}:fence`. The braces put both keys in one
 * Redis Cluster slot.
 */
export function redisStore(
  redis: RedisScripting & Pick<Redis, 'hmget' | 'get'>,
  options: RedisStoreOptions = {},
): FencedStore {
  checkObject('options', options, '{ prefix? }', REDIS_STORE_OPTION_KEYS);
  checkSafeClient(redis);
  const prefix = options.prefix ?? redisDefaults.prefix;
  if (typeof prefix !== 'string') {
    throw invalid('options.prefix', 'a string', prefix);
  }
  const keys = (resource: string) => {
    const base = `${prefix}{${checkResource(resource)}}`;
    return { value: `${base}:value`, fence: `${base}:fence` };
  };
  return {
    async write(write) {
      const { resource, token, value } = checkWrite(write);
      const k = keys(resource);
      const t = token.toString();
      await fencedExec(redis, {
        fenceKey: k.fence,
        token: t,
        commands: [['HSET', k.value, 'value', value, 'token', t]],
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
