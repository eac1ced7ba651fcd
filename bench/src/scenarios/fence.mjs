// Fenced write against the same plain write, per backend, sequential on one connection, so the
// difference is the fence's own cost (the extra predicate, the fence row, the script) rather
// than contention. PostgreSQL and Redis are found like the integration tests find them
// (DATABASE_URL / REDIS_URL, else localhost); a backend that does not answer is skipped.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { latencyRow, judged } from '../lib/rows.mjs';
import { redisClient } from '../lib/redis-lock.mjs';
import { interleave, percentile } from '../lib/stats.mjs';

export const id = 'fence';
export const title = 'fenced writes vs plain writes';

/**
 * Rows for a fenced op against its plain twin. The ratio is the median round's (each round's p50
 * ratio, interleaved, so drift falls on both alike); `maxRound` also bounds the worst round.
 */
function compared(name, res, limit, { maxRound } = {}) {
  const perRound = res.perRound.fenced.map(
    (slice, r) => percentile(slice, 0.5) / percentile(res.perRound.plain[r], 0.5),
  );
  const [lo, hi] = [Math.min(...perRound), Math.max(...perRound)];
  const median = percentile(perRound, 0.5);
  const overall = percentile(res.samples.fenced, 0.5) / percentile(res.samples.plain, 0.5);
  const row = judged(
    latencyRow(id, `${name}: fenced`, res.samples.fenced, {
      note: `per-round p50 ratio ${lo.toFixed(2)}–${hi.toFixed(2)}×, median round ${median.toFixed(2)}×, all samples ${overall.toFixed(2)}×`,
      roundRatios: perRound.map((x) => Math.round(x * 1000) / 1000),
    }),
    median,
    limit === undefined
      ? 'report'
      : `≤${limit}× median round${maxRound === undefined ? '' : `, none >${maxRound}×`}`,
    limit,
  );
  if (maxRound !== undefined) row.met = row.met && hi <= maxRound;
  return [
    judged(latencyRow(id, `${name}: plain (baseline)`, res.samples.plain), 1, 'baseline'),
    row,
  ];
}

async function postgres(ctx, opts, tag) {
  const { default: pg } = await import('pg');
  const pgFence = await import('@leasehold/fence/postgres');
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 2000 });
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    await pool.end();
    return [{ scenario: id, name: 'PostgreSQL rows', note: `skipped: ${url}: ${err.message}` }];
  }
  const table = `fence_bench_${tag}`;
  const fences = `fence_bench_${tag}_fences`;
  try {
    await pool.query(
      `CREATE TABLE ${table} (id text PRIMARY KEY, value text NOT NULL, fence int8)`,
    );
    await pool.query(pgFence.fenceTableDDL({ table: fences }));
    const upsert =
      `INSERT INTO ${table} (id, value, fence) VALUES ($1, $2, $3::int8) ` +
      `ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value, fence = EXCLUDED.fence`;
    const update = `UPDATE ${table} SET value = $2, fence = $3::int8 WHERE id = $1`;
    await pool.query(upsert, ['plain', 'v', '0']);
    await pool.query(upsert, ['plain-tx', 'v', '0']);
    await pool.query(upsert, ['fenced-tx', 'v', '0']);
    const row = await interleave(
      {
        plain: (i) => pool.query(update, ['plain', `v${i}`, String(i + 1)]),
        fenced: (i) =>
          pgFence.upsertFencedRow(pool, {
            table,
            key: { id: 'fenced' },
            values: { value: `v${i}` },
            token: BigInt(i + 1),
          }),
      },
      opts,
    );
    const tx = await interleave(
      {
        plain: async (i) => {
          const client = await pool.connect();
          try {
            await client.query('BEGIN');
            await client.query(update, ['plain-tx', `v${i}`, String(i + 1)]);
            await client.query('COMMIT');
          } finally {
            client.release();
          }
        },
        fenced: (i) =>
          pgFence.withFence(pool, { resource: 'bench', token: BigInt(i + 1), table: fences }, (t) =>
            t.query(update, ['fenced-tx', `v${i}`, String(i + 1)]),
          ),
      },
      opts,
    );
    return [
      ...compared('PostgreSQL UPDATE vs upsertFencedRow', row, 1.15),
      ...compared('PostgreSQL BEGIN/UPDATE/COMMIT vs withFence', tx, 1.1),
    ];
  } finally {
    await pool.query(`DROP TABLE IF EXISTS ${table}, ${fences}`);
    await pool.end();
  }
}

async function redis(ctx, opts, tag) {
  const redisFence = await import('@leasehold/fence/redis');
  const { redis: r, url } = await redisClient(redisFence.safeRedisOptions);
  if (!r)
    return [{ scenario: id, name: 'Redis rows', note: `skipped: nothing answered at ${url}` }];
  const prefix = `fence_bench_${tag}:`;
  try {
    const res = await interleave(
      {
        plain: (i) => r.set(`${prefix}plain`, `v${i}`),
        fenced: (i) =>
          redisFence.fencedSet(r, {
            fenceKey: `${prefix}fenced:fence`,
            key: `${prefix}fenced`,
            value: `v${i}`,
            token: BigInt(i + 1),
          }),
      },
      opts,
    );
    return compared('Redis SET vs fencedSet', res, 1.3, { maxRound: 1.6 });
  } finally {
    await r.del(`${prefix}plain`, `${prefix}fenced`, `${prefix}fenced:fence`);
    await r.quit();
  }
}

async function sqlite(ctx, opts) {
  let Database;
  try {
    ({ default: Database } = await import('better-sqlite3'));
    new Database(':memory:').close();
  } catch (err) {
    return [{ scenario: id, name: 'SQLite rows', note: `skipped: better-sqlite3: ${err.message}` }];
  }
  const sqliteFence = await import('@leasehold/fence/sqlite');
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-bench-'));
  const db = new Database(join(dir, 'bench.db'));
  try {
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (id TEXT PRIMARY KEY, value TEXT NOT NULL, fence INTEGER)');
    db.exec(sqliteFence.fenceTableDDL());
    const upsert = db.prepare(
      'INSERT INTO t (id, value, fence) VALUES (?, ?, ?) ' +
        'ON CONFLICT (id) DO UPDATE SET value = excluded.value, fence = excluded.fence',
    );
    const plainTx = db.transaction((i) => upsert.run('plain-tx', `v${i}`, BigInt(i + 1)));
    const res = await interleave(
      {
        plain: async (i) => plainTx.immediate(i),
        fenced: async (i) =>
          sqliteFence.withFence(db, { resource: 'bench', token: BigInt(i + 1) }, () =>
            upsert.run('fenced-tx', `v${i}`, BigInt(i + 1)),
          ),
      },
      opts,
    );
    // Microseconds per write: the fence's one extra statement is most of it. Reported only.
    return compared('SQLite transaction vs withFence', res, undefined);
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function run(ctx) {
  const opts = {
    rounds: ctx.scale(10, 5),
    perRound: ctx.scale(200, 40),
    warmup: ctx.scale(200, 40),
  };
  const tag = randomUUID().replaceAll('-', '').slice(0, 10);
  return [
    ...(await postgres(ctx, opts, tag)),
    ...(await redis(ctx, opts, tag)),
    ...(await sqlite(ctx, opts)),
  ];
}
