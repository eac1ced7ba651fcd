// Fenced write vs the same plain write, per backend, in one run: N sequential writes after a
// warm-up, on one connection, so the difference is the fence's own cost (extra SQL predicate,
// fence-row upsert, Lua script) rather than contention. Not part of the test suite.
//
//   pnpm build && node scripts/bench-fence.mjs [--n 2000] [--warmup 200]
//
// PostgreSQL and Redis are found like the integration tests find them: DATABASE_URL / REDIS_URL,
// else the local defaults. A backend that does not answer is skipped with a reason.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const fenceDir = new URL('../packages/fence/', import.meta.url);
const require = createRequire(new URL('package.json', fenceDir));
const postgres = await import(new URL('dist/postgres.js', fenceDir).href);
const redisFence = await import(new URL('dist/redis.js', fenceDir).href);
const sqlite = await import(new URL('dist/sqlite.js', fenceDir).href);

const { values: args } = parseArgs({
  options: { n: { type: 'string', default: '2000' }, warmup: { type: 'string', default: '200' } },
});
const N = Number(args.n);
const WARMUP = Number(args.warmup);
const id = randomUUID().replaceAll('-', '').slice(0, 10);
const results = [];

const ROUNDS = 5;

/** Seconds for `count` sequential calls of `op`, numbered from `from`. */
async function time(op, from, count) {
  const start = process.hrtime.bigint();
  for (let i = from; i < from + count; i++) await op(i);
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/**
 * Warms both writes up, then alternates them in ROUNDS slices of N/ROUNDS so drift on a shared
 * machine (other processes, checkpoints, autovacuum) falls on both sides alike.
 */
async function compare(backend, write, plain, fenced) {
  await time(plain, 0, WARMUP);
  await time(fenced, 0, WARMUP);
  const slice = Math.ceil(N / ROUNDS);
  let plainSeconds = 0;
  let fencedSeconds = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const from = WARMUP + r * slice;
    plainSeconds += await time(plain, from, slice);
    fencedSeconds += await time(fenced, from, slice);
  }
  const total = slice * ROUNDS;
  results.push({
    backend,
    write,
    plainOps: total / plainSeconds,
    fencedOps: total / fencedSeconds,
  });
}

async function benchPostgres() {
  const pg = require('pg');
  const candidates = process.env.DATABASE_URL
    ? [process.env.DATABASE_URL]
    : [...new Set(['postgres', userInfo().username])].map(
        (u) => `postgres://${u}@127.0.0.1:5432/test`,
      );
  let pool;
  for (const url of candidates) {
    const p = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 2000 });
    try {
      await p.query('SELECT 1');
      pool = p;
      break;
    } catch {
      await p.end();
    }
  }
  if (!pool) return console.log('PostgreSQL: skipped (no server answered; set DATABASE_URL)');
  const table = `fence_bench_${id}`;
  const fences = `fence_bench_${id}_fences`;
  try {
    await pool.query(
      `CREATE TABLE ${table} (id text PRIMARY KEY, value text NOT NULL, fence int8)`,
    );
    await pool.query(postgres.fenceTableDDL({ table: fences }));
    const upsert =
      `INSERT INTO ${table} (id, value, fence) VALUES ($1, $2, $3::int8) ` +
      `ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence`;
    await compare(
      'PostgreSQL',
      'row upsert vs upsertFencedRow',
      (i) => pool.query(upsert, ['plain', `v${i}`, String(i + 1)]),
      (i) =>
        postgres.upsertFencedRow(pool, {
          table,
          key: { id: 'fenced' },
          values: { value: `v${i}` },
          token: BigInt(i + 1),
        }),
    );
    await compare(
      'PostgreSQL',
      'BEGIN/upsert/COMMIT vs withFence',
      async (i) => {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          await client.query(upsert, ['plain-tx', `v${i}`, String(i + 1)]);
          await client.query('COMMIT');
        } finally {
          client.release();
        }
      },
      (i) =>
        postgres.withFence(pool, { resource: 'bench', token: BigInt(i + 1), table: fences }, (tx) =>
          tx.query(upsert, ['fenced-tx', `v${i}`, String(i + 1)]),
        ),
    );
  } finally {
    await pool.query(`DROP TABLE IF EXISTS ${table}, ${fences}`);
    await pool.end();
  }
}

async function benchRedis() {
  const { Redis } = require('ioredis');
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redis = new Redis(url, {
    ...redisFence.safeRedisOptions,
    lazyConnect: true,
    retryStrategy: () => null,
  });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
  } catch {
    redis.disconnect();
    return console.log(`Redis: skipped (nothing answered at ${url}; set REDIS_URL)`);
  }
  const prefix = `fence_bench_${id}:`;
  try {
    await compare(
      'Redis',
      'SET vs fencedSet (EVALSHA)',
      (i) => redis.set(`${prefix}plain`, `v${i}`),
      (i) =>
        redisFence.fencedSet(redis, {
          fenceKey: `${prefix}fenced:fence`,
          key: `${prefix}fenced`,
          value: `v${i}`,
          token: BigInt(i + 1),
        }),
    );
  } finally {
    await redis.del(`${prefix}plain`, `${prefix}fenced`, `${prefix}fenced:fence`);
    await redis.quit();
  }
}

async function benchSqlite() {
  const Database = require('better-sqlite3');
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-bench-'));
  const db = new Database(join(dir, 'bench.db'));
  try {
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (id TEXT PRIMARY KEY, value TEXT NOT NULL, fence INTEGER)');
    db.exec(sqlite.fenceTableDDL());
    const upsert = db.prepare(
      'INSERT INTO t (id, value, fence) VALUES (?, ?, ?) ' +
        'ON CONFLICT (id) DO UPDATE SET value = excluded.value, fence = excluded.fence',
    );
    await compare(
      'SQLite (WAL)',
      'row upsert vs upsertFencedRow',
      (i) => upsert.run('plain', `v${i}`, BigInt(i + 1)),
      (i) =>
        sqlite.upsertFencedRow(db, {
          table: 't',
          key: { id: 'fenced' },
          values: { value: `v${i}` },
          token: BigInt(i + 1),
        }),
    );
    const plainTx = db.transaction((i) => upsert.run('plain-tx', `v${i}`, BigInt(i + 1)));
    await compare(
      'SQLite (WAL)',
      'transaction vs withFence',
      (i) => plainTx.immediate(i),
      (i) =>
        sqlite.withFence(db, { resource: 'bench', token: BigInt(i + 1) }, () =>
          upsert.run('fenced-tx', `v${i}`, BigInt(i + 1)),
        ),
    );
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(
  `fenced vs plain writes: N=${N} each, sequential, alternating in ${ROUNDS} rounds after ${WARMUP} warm-up, one connection\n`,
);
await benchPostgres();
await benchRedis();
await benchSqlite();

const rows = results.map((r) => ({
  backend: r.backend,
  write: r.write,
  'plain ops/s': Math.round(r.plainOps),
  'fenced ops/s': Math.round(r.fencedOps),
  'fenced/plain': (r.fencedOps / r.plainOps).toFixed(2),
}));
console.table(rows);
