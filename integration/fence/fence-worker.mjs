// A lock holder in its own process, for the seed scenario: it holds one fencing token (given as
// an argument, as if from a lock grant) and writes the resource each time a line arrives on stdin,
// answering with one JSON line per write. It exits when stdin closes.
//
//   node fence-worker.mjs <postgres|redis> <url> <table-or-key-prefix> <resource> <token>
import { isStaleTokenError } from '@leasehold/fence';
import { createInterface } from 'node:readline';

const [backend, url, target, resource, token] = process.argv.slice(2);
if (!backend || !url || !target || !resource || !token) {
  console.error(
    'usage: fence-worker.mjs <postgres|redis> <url> <table-or-prefix> <resource> <token>',
  );
  process.exit(2);
}

const { write, close } = await open(backend);
for await (const line of createInterface({ input: process.stdin })) {
  const value = line.trim();
  try {
    await write(value);
    reply({ ok: true, pid: process.pid });
  } catch (err) {
    reply(
      isStaleTokenError(err)
        ? {
            stale: true,
            name: err.name,
            token: String(err.token),
            highest: String(err.highestToken),
          }
        : { error: String(err) },
    );
  }
}
await close();

function reply(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

async function open(kind) {
  if (kind === 'postgres') {
    const { default: pg } = await import('pg');
    const { upsertFencedRow } = await import('@leasehold/fence/postgres');
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    return {
      write: (value) =>
        upsertFencedRow(pool, {
          table: target,
          key: { id: resource },
          values: { value },
          token,
          resource,
        }),
      close: () => pool.end(),
    };
  }
  if (kind === 'redis') {
    const { Redis } = await import('ioredis');
    const { fencedSet, safeRedisOptions } = await import('@leasehold/fence/redis');
    const redis = new Redis(url, { ...safeRedisOptions });
    return {
      write: (value) =>
        fencedSet(redis, {
          fenceKey: `${target}${resource}:fence`,
          key: `${target}${resource}`,
          value,
          token,
        }),
      close: () => redis.quit(),
    };
  }
  throw new Error(`unknown backend ${kind}: allowed: postgres, redis`);
}
