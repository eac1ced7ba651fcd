// The demo's downstream store: an SQLite file by default, PostgreSQL for a postgres:// URL,
// Redis for a redis:// URL.
// A fenced write only lands if the row's fence is <= the writer's token; a plain one always lands.
import * as sqlite from '@leasehold/fence/sqlite';
import * as postgres from '@leasehold/fence/postgres';
import * as redisFence from '@leasehold/fence/redis';

const TABLE = 'leasehold_demo_invoice';

export async function openStore(url) {
  if (url.startsWith('redis')) {
    const { Redis } = await import('ioredis');
    // safeRedisOptions: a write whose reply is lost to a reconnect is not sent a second time.
    const redis = new Redis(url, { ...redisFence.safeRedisOptions, lazyConnect: true });
    await redis.connect();
    const key = (id) => `${TABLE}:${id}`;
    const fenceKey = (id) => `${TABLE}:${id}:fence`;
    return {
      kind: 'Redis',
      async reset() {
        await redis.del(key('invoice-42'), fenceKey('invoice-42'));
      },
      async write(id, body, token, fenced) {
        if (fenced) {
          await redisFence.fencedSet(redis, {
            fenceKey: fenceKey(id),
            token,
            key: key(id),
            value: body,
          });
        } else {
          await redis.mset(key(id), body, fenceKey(id), token.toString());
        }
      },
      async read(id) {
        const [body, fence] = await redis.mget(key(id), fenceKey(id));
        return body === null ? undefined : { body, fence };
      },
      close: () => redis.quit(),
    };
  }
  if (url.startsWith('postgres')) {
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    await pool.query(
      `CREATE TABLE IF NOT EXISTS ${TABLE} (id text PRIMARY KEY, body text NOT NULL, fence int8)`,
    );
    return {
      kind: 'PostgreSQL',
      async reset() {
        await pool.query(`DELETE FROM ${TABLE} WHERE id = 'invoice-42'`);
      },
      async write(id, body, token, fenced) {
        if (fenced) {
          await postgres.upsertFencedRow(pool, {
            table: TABLE,
            key: { id },
            values: { body },
            token,
          });
        } else {
          await pool.query(
            `INSERT INTO ${TABLE} (id, body, fence) VALUES ($1, $2, $3::int8)
             ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, fence = EXCLUDED.fence`,
            [id, body, token.toString()],
          );
        }
      },
      async read(id) {
        const res = await pool.query(
          `SELECT body, fence::text AS fence FROM ${TABLE} WHERE id = $1`,
          [id],
        );
        return res.rows[0];
      },
      close: () => pool.end(),
    };
  }
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(url);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.exec(
    `CREATE TABLE IF NOT EXISTS ${TABLE} (id TEXT PRIMARY KEY, body TEXT NOT NULL, fence INTEGER)`,
  );
  return {
    kind: 'SQLite',
    async reset() {
      db.prepare(`DELETE FROM ${TABLE} WHERE id = 'invoice-42'`).run();
    },
    async write(id, body, token, fenced) {
      if (fenced) {
        sqlite.upsertFencedRow(db, { table: TABLE, key: { id }, values: { body }, token });
      } else {
        db.prepare(
          `INSERT INTO ${TABLE} (id, body, fence) VALUES (?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET body = excluded.body, fence = excluded.fence`,
        ).run(id, body, token);
      }
    },
    async read(id) {
      const row = db
        .prepare(`SELECT body, fence FROM ${TABLE} WHERE id = ?`)
        .safeIntegers(true)
        .get(id);
      return row && { body: row.body, fence: String(row.fence) };
    },
    close: async () => db.close(),
  };
}
