import type { ClientBase } from 'pg';
import { describe, expect, it } from 'vitest';
import { isStaleTokenError, type StaleTokenError } from './errors.js';
import { fenceTableDDL, upsertFencedRow, withFence } from './postgres.js';

/** Records every query and answers from a script, so SQL shape and parameters can be checked. */
function fakeClient(answer: (sql: string) => { rowCount: number; rows: unknown[] }) {
  const queries: { sql: string; params: unknown[] | undefined }[] = [];
  const client = {
    async query(sql: string, params?: unknown[]) {
      queries.push({ sql, params });
      return answer(sql);
    },
  };
  return { client: client as unknown as ClientBase, queries };
}

const big = 9223372036854775807n;

describe('postgres upsertFencedRow', () => {
  it('sends the token as an int8 parameter, never in the SQL text', async () => {
    const { client, queries } = fakeClient(() => ({ rowCount: 1, rows: [] }));
    await upsertFencedRow(client, {
      table: 'app.accounts',
      key: { id: 'a' },
      values: { balance: 10 },
      token: big,
    });
    const [upsert] = queries;
    expect(upsert?.sql).not.toContain(big.toString());
    expect(upsert?.sql).toContain('$3::int8');
    expect(upsert?.sql).toContain('INSERT INTO "app"."accounts" AS "target"');
    expect(upsert?.sql).toContain(
      'WHERE "target"."fence" IS NULL OR "target"."fence" <= EXCLUDED."fence"',
    );
    expect(upsert?.params).toEqual(['a', 10, '9223372036854775807']);
  });

  it('reads the current token back when no row changed', async () => {
    const { client, queries } = fakeClient((sql) =>
      sql.startsWith('SELECT')
        ? { rowCount: 1, rows: [{ fence: '9007199254740993' }] }
        : { rowCount: 0, rows: [] },
    );
    let caught: unknown;
    try {
      await upsertFencedRow(client, { table: 't', key: { id: 7 }, token: 9007199254740992n });
    } catch (err) {
      caught = err;
    }
    expect(isStaleTokenError(caught)).toBe(true);
    expect((caught as StaleTokenError).highestToken).toBe(9007199254740993n);
    expect((caught as StaleTokenError).resource).toBe('t[id=7]');
    expect(queries[1]?.params).toEqual([7]);
  });

  it('validates identifiers and tokens before sending anything', async () => {
    const { client, queries } = fakeClient(() => ({ rowCount: 1, rows: [] }));
    await expect(
      upsertFencedRow(client, { table: 't', key: { 'id"--': 1 }, token: 1n }),
    ).rejects.toThrow(/invalid key column/);
    await expect(
      upsertFencedRow(client, { table: 't', key: { id: 1 }, token: '01' }),
    ).rejects.toThrow(/invalid fencing token "01"/);
    expect(queries).toEqual([]);
  });
});

describe('postgres withFence', () => {
  it('advances the fence first, runs the statements, commits', async () => {
    const { client, queries } = fakeClient(() => ({ rowCount: 1, rows: [] }));
    const result = await withFence(client, 'orders', 5n, async (tx) => {
      await tx.query('UPDATE orders SET x = 1');
      return 'done';
    });
    expect(result).toBe('done');
    expect(queries.map((q) => q.sql.split(' ')[0])).toEqual([
      'BEGIN',
      'INSERT',
      'UPDATE',
      'COMMIT',
    ]);
    expect(queries[1]?.params).toEqual(['orders', '5']);
    expect(queries[1]?.sql).toContain('$2::int8');
  });

  it('rolls back without running the statements on a stale token', async () => {
    const { client, queries } = fakeClient((sql) =>
      sql.startsWith('INSERT')
        ? { rowCount: 0, rows: [] }
        : { rowCount: 1, rows: [{ token: '9' }] },
    );
    let ran = false;
    const err = await withFence(client, 'orders', 5n, async () => {
      ran = true;
    }).catch((e: unknown) => e);
    expect(isStaleTokenError(err)).toBe(true);
    expect((err as StaleTokenError).highestToken).toBe(9n);
    expect(ran).toBe(false);
    expect(queries.at(-1)?.sql).toBe('ROLLBACK');
  });

  it('rolls back and rethrows when the statements fail', async () => {
    const { client, queries } = fakeClient(() => ({ rowCount: 1, rows: [] }));
    const boom = new Error('boom');
    await expect(
      withFence(client, 'orders', 5n, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(queries.at(-1)?.sql).toBe('ROLLBACK');
  });

  it('checks out and releases a pool client', async () => {
    const { client } = fakeClient(() => ({ rowCount: 1, rows: [] }));
    let released = 0;
    const pooled = Object.assign(client, { release: () => released++ });
    const pool = { totalCount: 0, idleCount: 0, connect: async () => pooled };
    await withFence(pool as never, 'r', 1n, async () => undefined);
    expect(released).toBe(1);
  });
});

describe('postgres fenceTableDDL', () => {
  it('creates an int8 token column under a validated name', () => {
    expect(fenceTableDDL('app.fences')).toContain('CREATE TABLE IF NOT EXISTS "app"."fences"');
    expect(fenceTableDDL()).toContain('token int8 NOT NULL');
    expect(() => fenceTableDDL('x;y')).toThrow(/invalid fence table "x;y"/);
  });
});
