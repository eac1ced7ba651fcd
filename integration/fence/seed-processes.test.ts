/**
 * The seed scenario with real processes: holder A (token n) writes, holder B (token m > n)
 * writes, then A wakes up and writes again with n. A's process must get StaleTokenError and B's
 * value must stay. Tokens are handed to the workers as arguments; etcd grants them elsewhere.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  describeWith,
  findPostgres,
  findRedis,
  pgPool,
  redisClient,
  uniqueName,
  type PgPool,
} from './stores.js';

const workerPath = fileURLToPath(new URL('./fence-worker.mjs', import.meta.url));

type Reply =
  | { ok: true; pid: number }
  | { stale: true; name: string; token: string; highest: string }
  | { error: string };

interface Worker {
  write(value: string): Promise<Reply>;
  stop(): Promise<number | null>;
}

function startWorker(args: string[]): Worker {
  const child = spawn(process.execPath, [workerPath, ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = once(child, 'exit') as Promise<[number | null]>;
  return {
    async write(value) {
      child.stdin.write(`${value}\n`);
      const next = await Promise.race([
        lines.next(),
        exited.then(([code]) => {
          throw new Error(`worker exited with code ${code} before answering`);
        }),
      ]);
      return JSON.parse(String(next.value)) as Reply;
    },
    async stop() {
      child.stdin.end();
      const [code] = await exited;
      return code;
    },
  };
}

async function seedScenario(args: (token: bigint) => string[]): Promise<void> {
  // Tokens beyond 2^53 that collapse to one double: the comparison must be exact across processes.
  const n = 9007199254740992n;
  const m = 9007199254740993n;
  const a = startWorker(args(n));
  const b = startWorker(args(m));
  try {
    expect(await a.write('from-A')).toMatchObject({ ok: true });
    expect(await b.write('from-B')).toMatchObject({ ok: true });
    expect(await a.write('from-A-again')).toEqual({
      stale: true,
      name: 'StaleTokenError',
      token: n.toString(),
      highest: m.toString(),
    });
  } finally {
    expect(await a.stop()).toBe(0);
    expect(await b.stop()).toBe(0);
  }
}

const [postgres, redisFound] = await Promise.all([findPostgres(), findRedis()]);

describe('fence seed scenario with real processes', () => {
  describeWith(postgres, 'PostgreSQL', (url) => {
    const table = uniqueName('seed');
    let pool: PgPool;
    beforeAll(async () => {
      pool = pgPool(url, 2);
      await pool.query(
        `CREATE TABLE "${table}" (id text PRIMARY KEY, value text NOT NULL, fence int8)`,
      );
    });
    afterAll(async () => {
      await pool.query(`DROP TABLE IF EXISTS "${table}"`);
      await pool.end();
    });

    it("rejects the paused holder's write and keeps the newer holder's value", async () => {
      await seedScenario((token) => ['postgres', url, table, 'ledger', token.toString()]);
      const { rows } = await pool.query(`SELECT value, fence::text AS fence FROM "${table}"`);
      expect(rows).toEqual([{ value: 'from-B', fence: '9007199254740993' }]);
    });
  });

  describeWith(redisFound, 'Redis', (url) => {
    const prefix = `${uniqueName('seed')}:`;
    const redis = redisClient(url);
    beforeAll(() => redis.connect());
    afterAll(async () => {
      await redis.del(`${prefix}ledger`, `${prefix}ledger:fence`);
      await redis.quit();
    });

    it("rejects the paused holder's write and keeps the newer holder's value", async () => {
      await seedScenario((token) => ['redis', url, prefix, 'ledger', token.toString()]);
      expect(await redis.get(`${prefix}ledger`)).toBe('from-B');
      expect(await redis.get(`${prefix}ledger:fence`)).toBe('9007199254740993');
    });
  });
});
