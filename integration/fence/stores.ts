/**
 * How the fence integration tests find PostgreSQL and Redis: the env var first, else the local
 * default if it answers. When nothing answers, the suite is skipped with a printed reason that
 * names the env var to set; an env var that is set but does not answer fails the run instead,
 * since someone asked for that server explicitly.
 */
import type { PgQueryable } from '@leasehold/fence/postgres';
import { safeRedisOptions } from '@leasehold/fence/redis';
import type { SqliteDatabase } from '@leasehold/fence/sqlite';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { userInfo } from 'node:os';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, it } from 'vitest';

// The integration package has no @types/pg or @types/better-sqlite3, so the drivers are loaded
// here and typed through the types the fence package already exposes.
const require = createRequire(import.meta.url);
export type PgPool = Extract<PgQueryable, { totalCount: number }>;
export type PgClient = Exclude<PgQueryable, PgPool>;
interface PgModule {
  Pool: new (config: { connectionString: string; max?: number }) => PgPool;
  Client: new (config: {
    connectionString: string;
    connectionTimeoutMillis?: number;
  }) => PgClient & {
    connect(): Promise<void>;
    end(): Promise<void>;
  };
}
const pg = require('pg') as PgModule;

export function pgPool(url: string, max = 8): PgPool {
  return new pg.Pool({ connectionString: url, max });
}

export function openSqlite(file: string): SqliteDatabase {
  const Database = require('better-sqlite3') as new (file: string) => SqliteDatabase;
  return new Database(file);
}

export type Found = { url: string } | { skip: string };

const PROBE_TIMEOUT_MS = 2_000;

export async function findPostgres(): Promise<Found> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) {
    await explicit('DATABASE_URL', probePostgres(fromEnv));
    return { url: fromEnv };
  }
  // Trust auth on the local server: the superuser name differs between installs.
  const users = [...new Set(['postgres', userInfo().username])];
  const tried: string[] = [];
  for (const user of users) {
    const url = `postgres://${user}@127.0.0.1:5432/test`;
    try {
      await probePostgres(url);
      return { url };
    } catch (err) {
      tried.push(`${url}: ${(err as Error).message}`);
    }
  }
  return {
    skip: `no PostgreSQL answered (${tried.join('; ')}); set DATABASE_URL to run these tests`,
  };
}

async function explicit(envVar: string, probe: Promise<void>): Promise<void> {
  try {
    await probe;
  } catch (err) {
    throw new Error(`${envVar} is set but its server did not answer: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

async function probePostgres(url: string): Promise<void> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: PROBE_TIMEOUT_MS,
  });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function findRedis(): Promise<Found> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) {
    await explicit('REDIS_URL', probeRedis(fromEnv));
    return { url: fromEnv };
  }
  const url = 'redis://127.0.0.1:6379';
  try {
    await probeRedis(url);
    return { url };
  } catch (err) {
    return {
      skip: `no Redis answered at ${url} (${(err as Error).message}); set REDIS_URL to run these tests`,
    };
  }
}

/**
 * A client that fails fast instead of retrying forever when the server is gone, and never sends a
 * fenced write twice (`safeRedisOptions`).
 */
export function redisClient(url: string): Redis {
  const redis = new Redis(url, {
    ...safeRedisOptions,
    lazyConnect: true,
    connectTimeout: PROBE_TIMEOUT_MS,
    retryStrategy: () => null,
  });
  // Connection errors also reject the command that hit them; the event would only be noise.
  redis.on('error', () => undefined);
  return redis;
}

async function probeRedis(url: string): Promise<void> {
  const redis = redisClient(url);
  try {
    await redis.connect();
    await redis.ping();
  } finally {
    redis.disconnect();
  }
}

/** `describe` when the store was found, else `describe.skip` with the reason printed. */
export function describeWith(found: Found, name: string, body: (url: string) => void): void {
  if ('url' in found) {
    describe(name, () => body(found.url));
    return;
  }
  console.warn(`[leasehold] skipping "${name}": ${found.skip}`);
  // A skipped placeholder keeps the skip visible in the totals, not just in the log.
  describe.skip(name, () => {
    it(`needs a server: ${found.skip}`, () => undefined);
  });
}

/** A name no other test file or run shares: tables and key prefixes are never reused. */
export function uniqueName(label: string): string {
  return `fence_it_${label}_${randomUUID().replaceAll('-', '').slice(0, 10)}`;
}

/**
 * A schema of the calling suite's own, created before its tests and dropped after: `url` puts
 * programs that name their own tables inside it (search_path), `admin` queries it.
 */
export function ownSchema(
  url: string,
  label: string,
): { name: string; url: string; admin: () => PgPool } {
  const name = uniqueName(label);
  let admin: PgPool | undefined;
  beforeAll(async () => {
    admin = pgPool(url, 1);
    await admin.query(`CREATE SCHEMA "${name}"`);
  });
  afterAll(async () => {
    await admin?.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
    await admin?.end();
  });
  const inSchema = new URL(url);
  inSchema.searchParams.set('options', `-c search_path=${name}`);
  return { name, url: inSchema.toString(), admin: () => admin! };
}
