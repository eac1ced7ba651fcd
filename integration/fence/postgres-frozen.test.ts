/**
 * withFence's idle bound (idle_in_transaction_session_timeout) against a real, SIGSTOPped worker
 * process, and calls that share one client. (The bound covers a transaction idle between
 * statements; a writer frozen while PostgreSQL still sends it a result is a documented limit.)
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { isInvalidArgumentError } from '@leasehold/fence';
import { withFence, fenceTableDDL } from '@leasehold/fence/postgres';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  describeWith,
  findPostgres,
  pgPool,
  uniqueName,
  type PgClient,
  type PgPool,
} from './stores.js';

// No @types/pg here (see stores.ts): the driver typed through the fence package's own types.
const pg = createRequire(import.meta.url)('pg') as {
  Pool: new (config: { connectionString: string; max?: number; options?: string }) => PgPool;
  Client: new (config: { connectionString: string }) => PgClient & {
    connect(): Promise<void>;
    end(): Promise<void>;
  };
};

const worker = fileURLToPath(new URL('./frozen-writer-worker.mjs', import.meta.url));

describeWith(await findPostgres(), 'withFence and a frozen writer', (url) => {
  let admin: PgPool;
  const tables: string[] = [];
  beforeAll(() => {
    admin = pgPool(url);
  });
  afterAll(async () => {
    for (const table of tables) await admin.query(`DROP TABLE IF EXISTS "${table}"`);
    await admin.end();
  });

  /** Starts the worker, SIGSTOPs it inside withFence, times the next holder's write. */
  async function frozenRun(mode: 'big' | 'idle', idleMs: number, freezeMs: number) {
    const table = uniqueName('fence');
    tables.push(table);
    await admin.query(fenceTableDDL({ table }));
    const child = spawn(process.execPath, [worker, url, table, mode, String(idleMs)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    const lines: Record<string, unknown>[] = [];
    let inside!: () => void;
    const entered = new Promise<void>((resolve) => (inside = resolve));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const message = JSON.parse(line) as Record<string, unknown>;
      lines.push(message);
      if (message.inside) inside();
    });
    await entered;
    process.kill(child.pid!, 'SIGSTOP');
    const wake = setTimeout(() => process.kill(child.pid!, 'SIGCONT'), freezeMs);
    const started = performance.now();
    await withFence(admin, { resource: 'printer', token: 6n, table }, async () => undefined);
    const waitedMs = performance.now() - started;
    await exited;
    clearTimeout(wake);
    return { waitedMs, worker: lines.at(-1) };
  }

  it('a writer SIGSTOPped between statements is ended at the bound: the next holder waits at most about idleInTransactionTimeoutMs, and the frozen one fails when it wakes', async () => {
    const idleMs = 1_000;
    const freezeMs = 6 * idleMs;
    const { waitedMs, worker: outcome } = await frozenRun('idle', idleMs, freezeMs);
    console.log(`[frozen] idle: next holder waited ${waitedMs.toFixed(0)} ms`);
    expect(waitedMs).toBeLessThan(freezeMs - idleMs);
    // Its late statement failed: its transaction was ended while it was frozen.
    expect(outcome).toHaveProperty('error');
    expect(outcome).not.toHaveProperty('result');
  }, 30_000);

  it("withFence does not loosen an operator's stricter idle bound (1 s for the role) to its own default", async () => {
    const table = uniqueName('fence');
    tables.push(table);
    await admin.query(fenceTableDDL({ table }));
    const strict = new pg.Pool({
      connectionString: url,
      max: 1,
      options: '-c idle_in_transaction_session_timeout=1000',
    });
    strict.on('error', () => undefined);
    try {
      const inside = await withFence(strict, { resource: 'r', token: 1n, table }, async (tx) => {
        const res = await tx.query<{ v: string }>(
          "SELECT current_setting('idle_in_transaction_session_timeout') AS v",
        );
        return res.rows[0]!.v;
      });
      expect(inside).toBe('1s');
    } finally {
      await strict.end();
    }
  });

  it('withFence on a client already inside withFence is refused, not silently committing the outer transaction', async () => {
    const table = uniqueName('fence');
    const data = uniqueName('data');
    tables.push(table, data);
    await admin.query(fenceTableDDL({ table }));
    await admin.query(`CREATE TABLE "${data}" (v text)`);
    const pool = pgPool(url, 2);
    try {
      const outcome = await withFence(pool, { resource: 'outer', token: 5n, table }, async (tx) => {
        await tx.query(`INSERT INTO "${data}" VALUES ('outer')`);
        await withFence(tx, { resource: 'inner', token: 3n, table }, async () => undefined);
        throw new Error('the outer statements fail after the inner call');
      }).catch((e: unknown) => e as Error);
      // The inner call is refused at once: it would have committed the outer transaction.
      expect(isInvalidArgumentError(outcome), String(outcome)).toBe(true);
      expect(outcome.message).toMatch(/already inside withFence/);
      // The outer transaction failed: nothing of it may be committed.
      const { rows } = await admin.query(`SELECT v FROM "${data}"`);
      expect(rows).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('two concurrent withFence calls on one client: the one that resolves has committed', async () => {
    const table = uniqueName('fence');
    tables.push(table);
    await admin.query(fenceTableDDL({ table }));
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const results = await Promise.allSettled(
        [1, 2].map((i) =>
          withFence(client, { resource: `c${i}`, token: 1n, table }, async () => {
            await new Promise((resolve) => setTimeout(resolve, 50));
            if (i === 1) throw new Error('first fails');
            return 'ok';
          }),
        ),
      );
      const committed = await admin.query<{ resource: string }>(`SELECT resource FROM "${table}"`);
      // Either the second call is refused, or its resolve means its fence advance committed.
      if (results[1]!.status === 'fulfilled') {
        expect(committed.rows.map((r) => r.resource)).toContain('c2');
      }
    } finally {
      await client.end();
    }
  });
});
